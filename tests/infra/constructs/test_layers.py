from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from infra.constructs.layers import Layers
from infra.layer_build import empty_layer

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk


def test_two_layers_for_python_311_and_the_architecture(stack: cdk.Stack, tmp_path: Path) -> None:
    layers = Layers(stack, "Layers", dependencies_dir=empty_layer(tmp_path / "d"), code_dir=empty_layer(tmp_path / "c"),
                    architecture=lambda_.Architecture.X86_64)
    template = Template.from_stack(stack)

    template.resource_count_is("AWS::Lambda::LayerVersion", 2)
    template.has_resource_properties("AWS::Lambda::LayerVersion", {
        "CompatibleRuntimes": ["python3.13"], "CompatibleArchitectures": ["x86_64"],
    })
    assert len(layers.all) == 2


def test_a_directory_without_python_is_refused(stack: cdk.Stack, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="python/"):
        Layers(stack, "Layers", dependencies_dir=tmp_path, code_dir=empty_layer(tmp_path / "c"),
               architecture=lambda_.Architecture.ARM_64)
