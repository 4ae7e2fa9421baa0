"""Each construct on a bare stack, asserted with ``aws_cdk.assertions.Template``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    from infra.constructs.function import FunctionBase


@pytest.fixture
def stack() -> cdk.Stack:
    import aws_cdk as cdk

    return cdk.Stack(cdk.App(), "Test")


@pytest.fixture
def code(tmp_path: Path) -> Path:
    directory = tmp_path / "function"
    directory.mkdir()
    (directory / "handler.py").write_text("def handler(event, context):\n    return {}\n")
    return directory


@pytest.fixture
def vpc(stack: cdk.Stack) -> ec2.Vpc:
    from aws_cdk import aws_ec2 as ec2

    isolated = ec2.SubnetConfiguration(name="p", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
    return ec2.Vpc(stack, "Vpc", nat_gateways=0, restrict_default_security_group=False,
                   subnet_configuration=[isolated])


@pytest.fixture
def base(stack: cdk.Stack, vpc: ec2.Vpc) -> FunctionBase:
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_logs as logs

    from infra.constructs.function import FunctionBase, FunctionNetwork

    layer = lambda_.LayerVersion.from_layer_version_arn(
        stack, "Layer", "arn:aws:lambda:eu-west-1:123456789012:layer:l:1")
    network = FunctionNetwork(vpc=vpc, subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
                              security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc))
    return FunctionBase(layers=[layer], architecture=lambda_.Architecture.ARM_64,
                        log_retention=logs.RetentionDays.ONE_WEEK, environment={"SHARED": "1"}, network=network)


@pytest.fixture(scope="session")
def stack_template(
    offline_context: dict[str, Any], results_code: Path, tmp_path_factory: pytest.TempPathFactory,
) -> Callable[..., dict[str, Any]]:
    """``stack_template(key=value, ...)``: the whole app's template with those context keys, offline and without
    cdk-nag (the nag tests run on the variants of ``tests/infra/conftest.py``); each context synthesized once."""
    cache: dict[str, dict[str, Any]] = {}

    def get(**context: Any) -> dict[str, Any]:
        key = json.dumps(context, sort_keys=True)
        if key not in cache:
            import aws_cdk as cdk

            from infra.app import build_app

            outdir = tmp_path_factory.mktemp("cdk-out-options")
            app = cdk.App(outdir=str(outdir), context={**offline_context, **context})
            build_app(app, results_code=results_code, nag=False)
            app.synth()
            cache[key] = json.loads(next(outdir.glob("*.template.json")).read_text())
        return cache[key]

    return get
