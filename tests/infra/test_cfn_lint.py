"""cfn-lint on every synthesized template: no error, and no warning but the one CDK always produces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.infra.conftest import VARIANTS

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.infra.conftest import Synthesized

CFN_LINT = Path(sys.executable).with_name("cfn-lint")
#: W3005 "dependency already enforced by a GetAtt": CDK adds DependsOn on a function's role that the
#: function's Role property already implies. Redundant, harmless, not ours to change.
IGNORED = ("W3005",)


@pytest.fixture(scope="module")
def findings(synth: Callable[[str], Synthesized]) -> dict[str, list[str]]:
    """cfn-lint's findings per variant, from one run over every template (it starts slowly)."""
    templates = {variant: synth(variant).template_path for variant in VARIANTS}
    result = subprocess.run(
        [str(CFN_LINT), "--format", "parseable", "--ignore-checks", *IGNORED, "--", *map(str, templates.values())],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode % 2 == 0, result.stderr  # even: bit flags of finding levels; odd: cfn-lint failed
    lines = result.stdout.splitlines()
    return {variant: [line for line in lines if line.startswith(f"{path}:")] for variant, path in templates.items()}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_template_passes_cfn_lint(findings: dict[str, list[str]], variant: str) -> None:
    assert findings[variant] == []
