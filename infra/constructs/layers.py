"""The two Lambda layers every function uses: third-party dependencies, and the ``jobrunner`` package.

The directories are built beforehand (``infra.layer_build``); this construct only publishes them, so
it stays free of side effects and tests can hand it any directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.constructs.function import RUNTIME

if TYPE_CHECKING:
    from pathlib import Path


class Layers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dependencies_dir: Path,
        code_dir: Path,
        architecture: lambda_.Architecture,
    ) -> None:
        super().__init__(scope, construct_id)
        for directory in (dependencies_dir, code_dir):
            if not (directory / "python").is_dir():
                raise ValueError(f"{directory} is not a Python layer directory (no python/ inside)")
        self.dependencies = lambda_.LayerVersion(
            self, "Dependencies",
            code=lambda_.Code.from_asset(str(dependencies_dir)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[architecture],
            description="Job runner: third-party dependencies (manylinux wheels)",
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.code = lambda_.LayerVersion(
            self, "Code",
            code=lambda_.Code.from_asset(str(code_dir)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[architecture],
            description="Job runner: the jobrunner package",
            removal_policy=RemovalPolicy.DESTROY,
        )

    @property
    def all(self) -> list[lambda_.ILayerVersion]:
        return [self.dependencies, self.code]
