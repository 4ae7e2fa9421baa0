"""``python -m cql.migrate``'s report: the statements' count, then each data step that moved rows."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from cql import migrate

if TYPE_CHECKING:
    import pytest


def test_the_command_prints_each_data_step_that_did_something(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a migration that ran two statements and gave three old one-time jobs their time to live
    def applied(settings: Any, **_: Any) -> list[str]:
        return ["CREATE TABLE ...", "ALTER TABLE ...", "-- gave 3 one-time job(s) of job_table_v2 their time to live"]

    monkeypatch.setattr(migrate, "migrate", applied)
    monkeypatch.setattr(sys, "argv", ["cql.migrate", "--keyspace", "ks_report"])
    # When the command runs
    migrate.main()
    # Then it says how many statements ran, and what the data step did
    out = capsys.readouterr().out.splitlines()
    assert out == ["schema applied to keyspace ks_report: 3 statement(s)",
                   "gave 3 one-time job(s) of job_table_v2 their time to live"]
