"""Settings from the environment."""

from __future__ import annotations

from jobrunner.config import Settings


def test_the_span_exporter_of_the_local_stack_is_off_unless_named() -> None:
    assert (Settings.from_env({}).otel_exporter, Settings.from_env({}).otel_file) == ("none", None)
    settings = Settings.from_env({"JOBRUNNER_OTEL_EXPORTER": " File ", "JOBRUNNER_OTEL_FILE": "/tmp/t.jsonl"})
    assert (settings.otel_exporter, settings.otel_file) == ("file", "/tmp/t.jsonl")
