"""Synthesis of the whole app, once per variant and test session, offline.

The dependency layer is stubbed (``dependency_layer_dir`` points at an empty layer), the layer cache
is a temporary directory, and the results function's code is a temporary stand-in, so the tests need
no network and do not depend on ``functions/results`` being written. Each variant is synthesized with
the cdk-nag plugin on; a nag failure is recorded, not raised, so the other tests still see the
template (the nag tests assert on the report).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    import aws_cdk as cdk

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
VARIANTS: dict[str, dict[str, Any]] = {
    # What cdk.json deploys: Keyspaces, IAM auth, arm64.
    "default": {},
    # A protected stage, pinned to its account and region; the zone names are what the cdk CLI's lookup writes
    # into the context for a pinned stack.
    "cognito-x86": {"api_auth": "cognito", "lambda_architecture": "x86_64", "stage": "prod", "segments": 64,
                    "stages": {"prod": {"account": "123456789012", "region": "eu-west-1", "protected": True}},
                    "availability-zones:account=123456789012:region=eu-west-1": ["eu-west-1a", "eu-west-1b",
                                                                                 "eu-west-1c"],
                    "alarm_email": "oncall@example.com", "allowed_topics": ["jobs", "reports"],
                    "tenant_topics": {"*": ["jobs"], "payments": ["payments", "jobs"]},
                    "tenant_map": {"arn:aws:iam::123456789012:role/payments-ci": "payments"}, "operators": ["ops"],
                    "kafka_client_vpcs": [{"subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                                           "security_group_ids": ["sg-0123456789abcdef0"]}],
                    # On domains of its own (TLS 1.2), with the web ACL prod gets by default
                    "api_domain": {"domain_name": "api.jobs.example.com", "certificate_arn":
                                   "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"},
                    "dashboard_domain": {"domain_name": "jobs.example.com", "certificate_arn":
                                         "arn:aws:acm:us-east-1:123456789012:certificate/"
                                         "0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"}},
    # A cheaper dev stage, set as docs/deploy.md shows: a provisioned MSK cluster, endpoints in one zone.
    "dev-provisioned": {"stages": {"dev": {"segments": 4, "endpoint_zones": 1, "kafka_provisioned": {
        "instance_type": "kafka.t3.small", "brokers_per_zone": 1, "storage_gib": 10}}}},
    # The small tier of cdk.json (issue #33), its subscriber and callers filled in.
    "small": {"stage": "small", "stages": {"small": {
        **json.loads(CDK_JSON.read_text())["context"]["stages"]["small"],
        "alarm_email": "oncall@example.com", "api_principals": ["arn:aws:iam::123456789012:role/ci"]}}},
    # Targets (issue 35): every kind, so HTTPS through a NAT gateway; the allow-lists by ARN, URL and account.
    "targets": {"targets": {"kinds": ["https", "lambda", "sqs"],
                            "lambda_allow": ["arn:aws:lambda:eu-west-1:123456789012:function:reports",
                                             "arn:aws:lambda:eu-west-1:123456789012:function:billing:live",
                                             "210987654321"],
                            "sqs_allow": ["https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"],
                            "address_allow": ["10.9.0.0/16"]}},
    # Lambda and SQS targets only: no NAT, the endpoints suffice.
    "targets-aws": {"targets": {"kinds": ["lambda", "sqs"], "lambda_allow": ["123456789012"],
                                "sqs_allow": ["123456789012"]}},
    "existing-cassandra": {"existing_cassandra": {
        "contact_points": ["10.1.0.10", "10.1.0.11"], "port": 9042,
        "secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cassandra-AbCdEf",
    }},
}


@dataclass
class Synthesized:
    variant: str
    outdir: Path
    template: dict[str, Any]
    report: dict[str, Any]
    error: str | None

    @property
    def manifest(self) -> dict[str, Any]:
        """The cloud assembly's artifact of the stack: its environment, termination protection..."""
        manifest = json.loads((self.outdir / "manifest.json").read_text())
        (stack,) = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
        return dict(stack)

    @property
    def template_path(self) -> Path:
        return next(self.outdir.glob("*.template.json"))

    def resources(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == cfn_type}

    def violations(self) -> list[tuple[str, str, list[str]]]:
        return [
            (v["severity"], v["ruleName"], [c["constructPath"] for c in v["violatingConstructs"]])
            for plugin in self.report.get("pluginReports", []) for v in plugin["violations"]
        ]


@pytest.fixture(scope="session")
def stub_dependency_layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from infra.layer_build import empty_layer

    return empty_layer(tmp_path_factory.mktemp("dependency-layer"))


@pytest.fixture(scope="session")
def results_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("results-function")
    (directory / "handler.py").write_text("def handler(event, context):\n    return {}\n")
    return directory


@pytest.fixture(scope="session")
def offline_context(stub_dependency_layer: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """cdk.json's context (deployment defaults and CDK feature flags, as the cdk CLI passes them), offline."""
    return {**json.loads(CDK_JSON.read_text())["context"],
            "dependency_layer_dir": str(stub_dependency_layer),
            "build_cache_dir": str(tmp_path_factory.mktemp("layer-cache"))}


def synthesize(
    variant: str, context: dict[str, Any], outdir: Path, results_code: Path | None, *, nag: bool = True,
) -> tuple[cdk.App, Synthesized]:
    import aws_cdk as cdk

    from infra.app import build_app

    app = cdk.App(outdir=str(outdir), context=context)
    build_app(app, results_code=results_code, nag=nag)
    error = None
    try:
        app.synth()
    except RuntimeError as exc:  # ValidationFailed: the templates are written, the report says why
        error = str(exc)
    report_path = outdir / "validation-report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    template_path = next(outdir.glob("*.template.json"))
    return app, Synthesized(variant, outdir, json.loads(template_path.read_text()), report, error)


@pytest.fixture(scope="session")
def synth(
    offline_context: dict[str, Any], results_code: Path, tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], Synthesized]:
    """``synth(variant)``: the variant synthesized on first use, then kept for the session."""
    cache: dict[str, Synthesized] = {}

    def get(variant: str) -> Synthesized:
        if variant not in cache:
            outdir = tmp_path_factory.mktemp(f"cdk-out-{variant}")
            _app, cache[variant] = synthesize(variant, {**offline_context, **VARIANTS[variant]}, outdir, results_code)
        return cache[variant]

    return get


@pytest.fixture(scope="session")
def default_app(synth: Callable[[str], Synthesized]) -> Synthesized:
    return synth("default")
