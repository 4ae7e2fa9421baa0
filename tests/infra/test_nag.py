"""cdk-nag (AwsSolutions pack): no finding left, and no acknowledgement without a finding behind it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.infra.conftest import VARIANTS, synthesize

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.infra.conftest import Synthesized


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_finding_is_left_unacknowledged(synth: Callable[[str], Synthesized], variant: str) -> None:
    synthesized = synth(variant)

    assert synthesized.violations() == []
    assert synthesized.error is None


class _RecordingValidations:
    """Stands in for ``aws_cdk.Validations`` in ``infra.constructs.nag``: records, acknowledges nothing."""

    recorded: list[tuple[str, str]] = []

    def __init__(self, scope: Any) -> None:
        self._path = scope.node.path

    @classmethod
    def of(cls, scope: Any) -> _RecordingValidations:
        return cls(scope)

    def acknowledge(self, *acknowledgments: Any) -> None:
        for ack in acknowledgments:
            assert len(ack.reason) > 40, f"{ack.id} at {self._path}: say specifically why it does not apply"
            self.recorded.append((self._path, ack.id))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_acknowledgement_answers_a_real_finding(
    variant: str, offline_context: dict[str, Any], results_code: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the app synthesized with every acknowledgement recorded instead of applied
    import infra.constructs.nag

    monkeypatch.setattr(_RecordingValidations, "recorded", [])
    monkeypatch.setattr(infra.constructs.nag, "Validations", _RecordingValidations)
    _app, bare = synthesize(variant, {**offline_context, **VARIANTS[variant]}, tmp_path, results_code)

    # Then each acknowledgement matches a finding of that rule on that construct or below it
    findings = [(rule, path) for _level, rule, paths in bare.violations() for path in paths]
    assert _RecordingValidations.recorded
    stale = [(scope, rule) for scope, rule in _RecordingValidations.recorded
             if not any(r == rule and (p == scope or p.startswith(scope + "/")) for r, p in findings)]
    assert stale == []
