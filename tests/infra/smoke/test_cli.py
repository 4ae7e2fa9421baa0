"""``python -m infra.smoke``: its exit code and what it prints, against the fake API."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import Console

from infra.smoke.cli import Deps, main
from tests.infra.smoke.fakes import URL
from tests.infra.smoke.test_target import CREDENTIALS, FakeCloudFormation, deployed

if TYPE_CHECKING:
    from pathlib import Path

    from infra.smoke.runner import ManualClock
    from tests.infra.smoke.fakes import FakeApi


def run(api: FakeApi, clock: ManualClock, tmp_path: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    deps = Deps(transport=api, clock=clock, console=Console(file=out, width=250, color_system=None), environ={},
                cwd=tmp_path, concurrent=False, credentials=CREDENTIALS,
                cloudformation=FakeCloudFormation("eu-west-1", {"JobRunner-dev": deployed(ApiUrl=URL)}))
    return main(list(args), deps), out.getvalue()


def test_a_stage_that_works_exits_0_with_each_step_and_a_summary(api: FakeApi, clock: ManualClock,
                                                                 tmp_path: Path) -> None:
    code, printed = run(api, clock, tmp_path, "--stage", "dev", "--lead", "5")
    assert code == 0, printed
    assert printed.startswith(f"smoke test of stack JobRunner-dev in eu-west-1, {URL} (SigV4)")
    assert "PASS  at: a few seconds ahead" in printed and "PASS  clean up" in printed
    assert printed.rstrip().splitlines()[-1].startswith("smoke test passed: 11 steps in ")


def test_a_failed_step_exits_1_and_the_summary_names_it(api: FakeApi, clock: ManualClock, tmp_path: Path) -> None:
    api.worker = False
    code, printed = run(api, clock, tmp_path, "--stage", "dev")
    assert code == 1
    assert "FAIL  run now" in printed and "no worker consumed topic 'jobs'" in printed
    assert printed.rstrip().splitlines()[-1].startswith("smoke test FAILED: 5 of 11 steps in ")


def test_a_stage_not_deployed_exits_1_saying_so(api: FakeApi, clock: ManualClock, tmp_path: Path) -> None:
    code, printed = run(api, clock, tmp_path, "--stage", "qa")
    assert code == 1 and "cannot find the API: no stack JobRunner-qa in eu-west-1" in printed
    assert api.sent == []


def test_a_url_and_a_token_need_no_aws(api: FakeApi, clock: ManualClock, tmp_path: Path) -> None:
    code, printed = run(api, clock, tmp_path, "--url", URL, "--token", "t0ken", "--lead", "3")
    assert code == 0, printed


def test_a_stage_and_a_url_together_are_a_usage_error(api: FakeApi, clock: ManualClock, tmp_path: Path) -> None:
    code, _ = run(api, clock, tmp_path, "--stage", "dev", "--url", URL)
    assert code == 2 and api.sent == []
