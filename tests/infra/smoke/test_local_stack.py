"""The smoke test, as ``make smoke`` runs it after a deploy, against this session's local stack: the same code,
another URL (and the stack's bearer token instead of SigV4)."""

from __future__ import annotations

import io
import re
import uuid
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from devstack import tokens
from infra.smoke.cli import Deps, main

if TYPE_CHECKING:
    from devstack.stack import LocalStack

pytestmark = pytest.mark.e2e


def test_the_smoke_test_passes_every_step_against_the_local_stack(local_stack: LocalStack) -> None:
    # Given the local stack, whose example worker runs the executions, and a tenant of the smoke's own (so that the
    # other tests never see its jobs)
    token = tokens.add(f"smoke-{uuid.uuid4().hex[:8]}")
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False, color_system=None)
    # When the smoke test runs against its URL, with jobs due 4 s ahead
    code = main(["--url", local_stack.url, "--token", token, "--lead", "4"], Deps(console=console))
    printed = out.getvalue()
    print(printed)
    # Then every step passed and it exits 0
    assert code == 0, printed
    steps = re.findall(r"^\s*[\d.]+ s  (PASS|FAIL|SKIP)  (.+?)\s{2,}", printed, re.MULTILINE)
    assert [result for result, _ in steps] == ["PASS"] * 11, printed
    assert "smoke test passed: 11 steps" in printed
