"""Entry point of the CDK app: ``python -m infra.app`` (what ``cdk.json`` runs, and ``make synth``).

Reads the context into a ``DeploymentConfig``, builds the layer directories (cached), parses
``cql/``, composes the stack and applies the cdk-nag AwsSolutions pack: a finding that is not
acknowledged fails the synth (report in ``cdk.out/validation-report.json``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from aws_cdk import Annotations, App, Validations
from cdk_nag import AwsSolutionsChecks

from cql.schema import load_tables, with_row_ttls
from devstack.dashboard import DASHBOARD_DIR
from infra.config import DeploymentConfig, cli_context
from infra.layer_build import (
    KEYSPACES_BUNDLE_SOURCE,
    PYTHON_VERSION,
    ROOT,
    build_code_layer,
    build_dependency_layer,
    target_python,
)
from infra.stack import JobRunnerStack, StackAssets
from jobrunner.adapters.stores.cassandra import STATEMENTS
from jobrunner.adapters.stores.changes import STATEMENTS as CHANGE_LOG_STATEMENTS

if TYPE_CHECKING:
    from collections.abc import Sequence

FUNCTIONS = ROOT / "functions"
TOPIC_ADMIN = Path(__file__).resolve().parent / "handlers" / "kafka_topics"


#: The results function's code (a test may give ``build_app`` a stand-in).
RESULTS_CODE = FUNCTIONS / "results"


def _path(value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else ROOT / path


def prepare_assets(config: DeploymentConfig, *, results_code: Path) -> StackAssets:
    cache = _path(config.build_cache_dir)
    python = target_python()
    dependencies = (_path(config.dependency_layer_dir) if config.dependency_layer_dir
                    else build_dependency_layer(architecture=config.lambda_architecture, cache_dir=cache,
                                                bytecode_python=python))
    ca_bundle = _path(config.keyspaces_ca_bundle) if config.keyspaces_ca_bundle else KEYSPACES_BUNDLE_SOURCE
    return StackAssets(
        dependency_layer=dependencies,
        code_layer=build_code_layer(cache_dir=cache, ca_bundle=ca_bundle, bytecode_python=python),
        bytecode_python=python,
        api=FUNCTIONS / "api",
        tick=FUNCTIONS / "tick",
        scan=FUNCTIONS / "scan",
        topic_admin=TOPIC_ADMIN,
        results=results_code,
        reconcile=FUNCTIONS / "reconcile",
        delivery=FUNCTIONS / "delivery",
        dashboard=DASHBOARD_DIR,
    )


def build_app(app: App | None = None, *, results_code: Path | None = None, nag: bool = True) -> JobRunnerStack:
    """Compose the stack in ``app``; ``results_code`` defaults to ``RESULTS_CODE``."""
    app = app or App()
    config = DeploymentConfig.from_context(app.node.try_get_context)
    assets = prepare_assets(config, results_code=results_code or RESULTS_CODE)
    tables = with_row_ttls(load_tables(), (*STATEMENTS, *CHANGE_LOG_STATEMENTS))
    stack = JobRunnerStack(app, config.stack_name, config=config, assets=assets, tables=tables)
    if assets.bytecode_python is None:
        Annotations.of(stack).add_warning_v2(
            "jobrunner:layer-bytecode",
            f"no Python {PYTHON_VERSION} interpreter found: the layers ship without bytecode, so every cold start "
            f"compiles them (install python{PYTHON_VERSION}, or set JOBRUNNER_LAYER_PYTHON; docs/deploy.md)")
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stack


def main(argv: Sequence[str] | None = None, *, outdir: Path | None = None) -> None:
    """Run by the cdk CLI, which passes the context (``cdk.json`` and ``-c``) and the output directory in the
    environment; or directly (``make synth CDK_ARGS="-c stage=prod"``): then the context is ``cdk.json``'s with
    the ``-c`` arguments applied, as the CLI would, feature flags included, and the output is ./cdk.out."""
    if os.environ.get("CDK_OUTDIR"):
        app = App()
    else:
        context = cli_context(ROOT / "cdk.json", sys.argv[1:] if argv is None else argv)
        app = App(outdir=str(outdir or ROOT / "cdk.out"), context=context)
    build_app(app)
    app.synth()


if __name__ == "__main__":
    main()
