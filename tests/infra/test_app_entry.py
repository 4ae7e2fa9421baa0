"""The command cdk.json gives the cdk CLI runs and synthesizes, the way the CLI calls it (env vars)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def test_cdk_json_app_command_synthesizes_into_the_cli_outdir(
    tmp_path: Path, offline_context: dict[str, Any], results_code: Path,
) -> None:
    command = shlex.split(json.loads((ROOT / "cdk.json").read_text())["app"])
    # Given the environment the cdk CLI sets: the output directory and the context (as JSON)
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path), "CDK_CONTEXT_JSON": json.dumps(offline_context)}

    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)

    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "JobRunner-dev.template.json").is_file()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert report["pluginReports"] == []


def test_make_synth_reads_cdk_json_and_the_command_lines_context(
    tmp_path: Path, offline_context: dict[str, Any], results_code: Path, monkeypatch: Any,
) -> None:
    from infra import app as app_module

    # Given `make synth CDK_ARGS="-c stage=staging"`, run outside the cdk CLI (no CDK_OUTDIR, no context JSON)
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.setattr(app_module, "RESULTS_CODE", results_code)
    apps = []
    build_app = app_module.build_app
    monkeypatch.setattr(app_module, "build_app", lambda app: apps.append(app) or build_app(app))
    argv = ["-c", "stage=staging", "-c", "alarm_email=oncall@example.com",
            "-c", "api_principals=arn:aws:iam::123456789012:role/ci",
            "-c", f"dependency_layer_dir={offline_context['dependency_layer_dir']}",
            "-c", f"build_cache_dir={offline_context['build_cache_dir']}"]

    app_module.main(argv, outdir=tmp_path)

    # Then that stage is synthesized with cdk.json's settings, its feature flags included
    assert (tmp_path / "JobRunner-staging.template.json").is_file()
    assert apps[0].node.try_get_context("@aws-cdk/aws-iam:minimizePolicies") is True
    assert apps[0].node.try_get_context("segments") == "auto"
