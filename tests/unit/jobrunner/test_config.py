"""Settings from the environment."""

from __future__ import annotations

import pickle

import pytest

from jobrunner.config import Settings, SettingsError, table
from jobrunner.domain.target_grants import TargetGrants


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
    # in the order named, then the granted ones (the order the variable is written back in)
    assert settings.allowed_topics == ("jobs", "reports", "payments")
    assert dict(settings.tenant_topics) == {"payments": ("payments", "jobs"), "*": ("jobs",)}
    assert settings.topic_grants.topics_of("someone") == ("jobs",)
    assert dict(settings.tenant_map) == {"arn:aws:iam::123456789012:role/ci": "payments"}
    assert settings.operators == ("ops", "oncall")
    hash(settings)  # still usable as a key


@pytest.mark.parametrize(("name", "value", "message"), [
    ("JOBRUNNER_TENANT_TOPICS", "{nope", "JOBRUNNER_TENANT_TOPICS: not JSON"),
    ("JOBRUNNER_TENANT_TOPICS", '["jobs"]', "JOBRUNNER_TENANT_TOPICS: expected a JSON object, got list"),
    ("JOBRUNNER_TENANT_TOPICS", '{"a": "jobs"}', "tenant 'a': expected a list of topic names"),
    ("JOBRUNNER_TENANT_MAP", '{"arn:x": 3}', "principal 'arn:x': expected a tenant name"),
    ("JOBRUNNER_TENANT_MAP", '{"arn:x": " "}', "principal 'arn:x': expected a tenant name"),
    ("JOBRUNNER_TENANT_MAP", '{"": "payments"}', "principal '': expected a principal's ARN or name"),
    ("JOBRUNNER_TENANT_TOPICS", '{"": ["jobs"]}', "tenant '': expected a tenant name"),
    # A topic Kafka refuses could be neither created nor published to
    ("JOBRUNNER_TENANT_TOPICS", '{"a": ["pay ments"]}', "tenant 'a': 'pay ments' is not a Kafka topic name"),
    ("JOBRUNNER_ALLOWED_TOPICS", "jobs,reports/daily", "JOBRUNNER_ALLOWED_TOPICS: 'reports/daily' is not a Kafka"),
    ("JOBRUNNER_ALLOWED_TOPICS", "x" * 250, "is not a Kafka topic name"),
])
def test_a_malformed_tenant_setting_names_the_variable_and_the_entry(name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_env({name: value})


def test_a_refusal_says_which_attribute_each_reason_is_about() -> None:
    # Given two wrong values: the text names their variables, the problems their attributes (for other readers,
    # such as the CDK app, which names its own keys)
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({"JOBRUNNER_SEGMENTS": "0", "JOBRUNNER_TENANT_MAP": '{"arn:x": " "}'})

    assert refused.value.problems == (("segments", "expected a whole number of at least 1, got '0'"),
                                      ("tenant_map", "principal 'arn:x': expected a tenant name"))
    assert str(refused.value) == ("JOBRUNNER_SEGMENTS: expected a whole number of at least 1, got '0'; "
                                  "JOBRUNNER_TENANT_MAP: principal 'arn:x': expected a tenant name")
    assert pickle.loads(pickle.dumps(refused.value)).problems == refused.value.problems


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


def test_a_single_node_is_the_default_and_a_cluster_is_named_by_its_settings() -> None:
    # Given no cluster settings: one replica, no datacenter, no speculative reads (the single-node stack)
    single = Settings.from_env({})
    assert (single.cassandra.local_dc, single.cassandra.replication_factor, single.cassandra.speculative_delay_ms,
            single.kafka.topic_replication) == (None, 1, 0, 1)
    # When a cluster's settings are given (as devstack.cluster's layout gives them)
    cluster = Settings.from_env({
        "CASSANDRA_CONTACT_POINTS": "127.0.0.2,127.0.0.3,127.0.0.4", "CASSANDRA_LOCAL_DC": "datacenter1",
        "CASSANDRA_REPLICATION_FACTOR": "3", "CASSANDRA_SPECULATIVE_DELAY_MS": "250", "KAFKA_TOPIC_REPLICATION": "3",
    })
    # Then every node is a contact point and the rest is carried to the adapters
    assert cluster.cassandra.contact_points == ("127.0.0.2", "127.0.0.3", "127.0.0.4")
    assert (cluster.cassandra.local_dc, cluster.cassandra.replication_factor, cluster.cassandra.speculative_delay_ms,
            cluster.kafka.topic_replication) == ("datacenter1", 3, 250, 3)


def test_tls_to_an_existing_cluster_is_carried_to_the_session_with_the_name_its_certificates_carry() -> None:
    settings = Settings.from_env({"CASSANDRA_TLS": "true", "CASSANDRA_CA_BUNDLE": "/opt/ca.pem",
                                  "CASSANDRA_TLS_SERVER_NAME": "cassandra.internal"})
    assert (settings.cassandra.tls, settings.cassandra.ca_bundle, settings.cassandra.tls_server_name) == (
        True, "/opt/ca.pem", "cassandra.internal")
    assert Settings.from_env({"CASSANDRA_TLS": "true"}).cassandra.tls_server_name is None


@pytest.mark.parametrize(("name", "value"), [
    ("CASSANDRA_REPLICATION_FACTOR", "0"), ("CASSANDRA_REPLICATION_FACTOR", "three"),
    ("KAFKA_TOPIC_REPLICATION", "-1"), ("CASSANDRA_SPECULATIVE_DELAY_MS", "-5"),
])
def test_a_replication_or_delay_that_is_not_a_count_names_the_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{name}: expected a whole number"):
        Settings.from_env({name: value})


def test_a_variable_out_of_its_bounds_names_the_variable_its_bounds_and_the_value() -> None:
    with pytest.raises(ValueError, match="CASSANDRA_PORT: expected a whole number of at least 1 and at most 65535, "
                                         "got '99999'"):
        Settings.from_env({"CASSANDRA_PORT": "99999"})
    with pytest.raises(ValueError, match=r"KAFKA_SECURITY: .*'msk-iam'.*got 'iam'"):
        Settings.from_env({"KAFKA_SECURITY": "iam"})
    with pytest.raises(ValueError, match="JOBRUNNER_WAKE_SCANS: expected true or false, got 'maybe'"):
        Settings.from_env({"JOBRUNNER_WAKE_SCANS": "maybe"})


def test_a_blank_variable_is_an_unset_one() -> None:
    assert Settings.from_env({"CASSANDRA_LOCAL_DC": " ", "JOBRUNNER_SEGMENTS": ""}) == Settings.from_env({})


def test_settings_written_to_the_environment_read_back_equal() -> None:
    # Given settings that differ from the defaults in every variable
    settings = Settings.of(
        segments=3, initial_lookback_minutes=2, topic="work", allowed_topics=("reports",),
        tenant_topics={"payments": ["payments"], "*": ["work"]}, tenant_map={"arn:x": "payments"},
        operators=("ops", "oncall"), max_payload_bytes=1000, tenant_limit_table={"*": {"submissions_per_second": 5}},
        results_topic="results", dead_letter_topic="dead", contact_points=("10.0.0.1", "10.0.0.2"),
        cassandra_port=9142, keyspace="ks", cassandra_mode="keyspaces", ca_bundle="/opt/ca.pem", local_dc="dc1",
        replication_factor=3, speculative_delay_ms=250, cassandra_secret_arn="arn:secret", cassandra_tls=True,
        kafka_bootstrap="b-1:9098,b-2:9098", kafka_security="msk-iam", topic_replication=3, heartbeat_table="hb",
        quota_table="quotas", dynamodb_endpoint="http://127.0.0.1:5000", scan_function="scan", wake_scans=True,
        change_log=False, reconcile_interval_s=300, reconcile_grace_s=60, reconcile_page_size=100,
        reconcile_rate=500, region="eu-west-1", result_key="key", result_key_secret_arn="arn:key",
        accept_unsigned_results=True, accept_v1_result_tokens=False, cassandra_tls_server_name="cassandra.internal",
        otel_exporter="file", otel_file="/tmp/traces.jsonl", delivery_topic="deliveries", target_kinds=("https",),
        target_lambda_allow=("123456789012",), target_sqs_allow=("*",),
        target_address_allow=("10.0.0.0/8", "fd00::/8"), target_aws_endpoint="http://127.0.0.1:5000",
        target_ca_bundle="/opt/hooks-ca.pem",
        webhook_secret_prefix="prod/hooks/",
        webhook_secrets={"alice": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}, delivery_tenant_concurrency=2,
        delivery_concurrency=8, delivery_tenant_rate=5, webhook_secret_cache_s=5.0,
        secrets_endpoint="http://127.0.0.1:5000", one_time_rows_expire=False,
    )
    assert not [name for name, info in Settings.model_fields.items() if getattr(settings, name) == info.default]
    # When they are written as variables and read back
    environment = settings.to_environment()
    # Then the same settings come back, and every variable was written
    assert Settings.from_env(environment) == settings
    assert set(environment) == set(Settings.variables())
    assert environment["JOBRUNNER_TENANT_TOPICS"] == '{"payments": ["payments"], "*": ["work"]}'


def test_the_target_rules_of_a_stage_are_read_and_checked() -> None:
    # Given a stage that allows lambda targets of one account, and sqs targets of one queue
    queue = "https://sqs.eu-west-1.amazonaws.com/123456789012/work"
    settings = Settings.from_env({"JOBRUNNER_TARGET_KINDS": "lambda, sqs",
                                  "JOBRUNNER_TARGET_LAMBDA_ALLOW": "123456789012", "JOBRUNNER_TARGET_SQS_ALLOW": queue})
    # Then its grants say so
    assert settings.target_grants == TargetGrants(frozenset({"lambda", "sqs"}), ("123456789012",), (queue,))
    # And by default every kind is allowed, no function nor queue, and deliveries go to their own topic
    assert Settings.from_env({}).target_grants == TargetGrants()
    assert Settings.from_env({}).delivery_topic == "job-deliveries"
    # And a stage may allow no kind at all, which it writes back as such
    none = Settings.from_env({"JOBRUNNER_TARGET_KINDS": "none"})
    assert none.target_grants.kinds == frozenset()
    assert Settings.from_env(none.to_environment()) == none


@pytest.mark.parametrize(("name", "value", "message"), [
    ("JOBRUNNER_TARGET_KINDS", "https,ftp", "JOBRUNNER_TARGET_KINDS: not a kind of target: ftp (expected https, "
                                            "lambda, sqs or none)"),
    ("JOBRUNNER_TARGET_LAMBDA_ALLOW", "*,1234", "JOBRUNNER_TARGET_LAMBDA_ALLOW: '1234' is neither *, a 12-digit "
                                                "account id nor a function ARN"),
    ("JOBRUNNER_TARGET_SQS_ALLOW", "https://example.com/q", "JOBRUNNER_TARGET_SQS_ALLOW: 'https://example.com/q' "
                                                            "is neither *, a 12-digit account id nor a queue URL"),
    ("JOBRUNNER_TARGET_ADDRESS_ALLOW", "10.0.0.1/8", "JOBRUNNER_TARGET_ADDRESS_ALLOW: not a network in CIDR "
                                                     "notation: '10.0.0.1/8' (10.0.0.1/8 has host bits set)"),
    ("JOBRUNNER_DELIVERY_TOPIC", "jobs", "JOBRUNNER_DELIVERY_TOPIC: 'jobs' is a topic jobs may name; the delivery "
                                         "topic must be another"),
])
def test_a_wrong_target_rule_names_its_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError) as wrong:
        Settings.from_env({name: value})
    assert str(wrong.value) == message


def test_only_the_given_variables_are_written_when_asked() -> None:
    settings = Settings.of(segments=4, wake_scans=True, operators=("ops",))
    assert settings.to_environment(given_only=True) == {
        "JOBRUNNER_SEGMENTS": "4", "JOBRUNNER_WAKE_SCANS": "true", "JOBRUNNER_OPERATORS": "ops"}


def test_settings_made_of_values_or_of_a_given_environment_read_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The CDK stack renders the functions' environment from Settings.of: a deploying shell's AWS_REGION
    # (which Lambda refuses as a function variable) or JOBRUNNER_* must not slip in.
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("JOBRUNNER_SEGMENTS", "9")
    assert Settings.of(segments=4).to_environment(given_only=True) == {"JOBRUNNER_SEGMENTS": "4"}
    given = Settings.from_env({"JOBRUNNER_TOPIC": "x"})
    assert (given.topic, given.segments, given.region) == ("x", 16, "us-east-1")
    assert (Settings.from_env().segments, Settings.from_env().region) == (9, "eu-west-1")


def test_a_copy_with_changes_is_checked_and_derives_what_depends_on_them() -> None:
    settings = Settings.from_env({"JOBRUNNER_SEGMENTS": "2"})
    moved = settings.replace(topic="elsewhere")
    assert (moved.segments, moved.topic, "elsewhere" in moved.allowed_topics) == (2, "elsewhere", True)
    with pytest.raises(ValueError, match="JOBRUNNER_SEGMENTS: expected a whole number of at least 1"):
        settings.replace(segments=0)


def test_the_table_of_variables_lists_each_with_its_meaning() -> None:
    rows = {row.split(" | ")[0].lstrip("| "): row for row in table().splitlines()[2:]}
    assert set(rows) == set(Settings.variables())
    assert "| JOBRUNNER_SEGMENTS | 16 | number of segments" in rows["JOBRUNNER_SEGMENTS"]
