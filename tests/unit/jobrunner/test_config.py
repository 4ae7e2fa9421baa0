"""Settings from the environment."""

from __future__ import annotations

import pickle

import pytest

from jobrunner.config import Settings


def test_the_span_exporter_of_the_local_stack_is_off_unless_named() -> None:
    assert (Settings.from_env({}).otel_exporter, Settings.from_env({}).otel_file) == ("none", None)
    settings = Settings.from_env({"JOBRUNNER_OTEL_EXPORTER": " File ", "JOBRUNNER_OTEL_FILE": "/tmp/t.jsonl"})
    assert (settings.otel_exporter, settings.otel_file) == ("file", "/tmp/t.jsonl")


def test_tenant_topics_operators_and_the_tenant_map_are_read_and_granted_topics_allowed() -> None:
    settings = Settings.from_env({
        "JOBRUNNER_ALLOWED_TOPICS": "jobs,reports",
        "JOBRUNNER_TENANT_TOPICS": '{"payments": ["payments", "jobs"], "*": ["jobs"]}',
        "JOBRUNNER_TENANT_MAP": '{"arn:aws:iam::123456789012:role/ci": "payments"}',
        "JOBRUNNER_OPERATORS": "ops, oncall",
    })
    assert settings.allowed_topics == {"jobs", "reports", "payments"}
    assert dict(settings.tenant_topics) == {"payments": ("payments", "jobs"), "*": ("jobs",)}
    assert settings.topic_grants.topics_of("someone") == ("jobs",)
    assert dict(settings.tenant_map) == {"arn:aws:iam::123456789012:role/ci": "payments"}
    assert settings.operators == {"ops", "oncall"}
    hash(settings)  # still usable as a key


@pytest.mark.parametrize(("name", "value", "message"), [
    ("JOBRUNNER_TENANT_TOPICS", "{nope", "JOBRUNNER_TENANT_TOPICS: not JSON"),
    ("JOBRUNNER_TENANT_TOPICS", '["jobs"]', "JOBRUNNER_TENANT_TOPICS: expected a JSON object, got list"),
    ("JOBRUNNER_TENANT_TOPICS", '{"a": "jobs"}', "tenant 'a': expected a list of topic names"),
    ("JOBRUNNER_TENANT_MAP", '{"arn:x": 3}', "principal 'arn:x': expected a tenant name"),
])
def test_a_malformed_tenant_setting_names_the_variable_and_the_entry(name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_env({name: value})


def test_settings_with_tenants_mappings_can_be_sent_to_another_process() -> None:
    # The benchmark's worker processes and any spawned helper receive the settings pickled.
    settings = Settings.from_env({
        "JOBRUNNER_TENANT_TOPICS": '{"payments": ["payments"]}', "JOBRUNNER_TENANT_MAP": '{"arn:x": "payments"}',
        "JOBRUNNER_TENANT_LIMITS": '{"*": {"submissions_per_second": 5}, "payments": {"payload_bytes": 10}}',
    })
    copy = pickle.loads(pickle.dumps(settings))
    assert (copy.topic_grants.topics_of("payments"), copy.tenant_limits.of("payments").payload_bytes) == (
        ("payments",), 10)
    assert dict(copy.tenant_map) == {"arn:x": "payments"}
