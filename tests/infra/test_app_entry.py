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
