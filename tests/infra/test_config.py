"""Context keys: defaults, parsing of ``-c key=value`` strings, validation, and cdk.json kept in step."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.config import (
    CONTEXT_DEFAULTS,
    ConfigError,
    DeploymentConfig,
    ExistingCassandra,
    scan_concurrency,
    stack_name_of,
    stage_region,
)
from jobrunner.config import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]
#: The one caller a stage other than dev admits, unless a test says otherwise.
CI_ROLE = "arn:aws:iam::123456789012:role/ci"


def config(**context: Any) -> DeploymentConfig:
    """Stages other than dev need an alarm subscriber: one is given unless the test says otherwise."""
    stage = context.get("stage", "dev")
    stages = context.get("stages", CONTEXT_DEFAULTS["stages"])
    own = stages.get(stage, {}) if isinstance(stages, dict) and isinstance(stages.get(stage), dict) else {}
    if stage != "dev" and "alarm_email" not in own:
        context.setdefault("alarm_email", "oncall@example.com")
    if stage != "dev" and "api_principals" not in own and context.get("api_auth", "iam") == "iam":
        context.setdefault("api_principals", [CI_ROLE])
    return DeploymentConfig.from_context(context.get)


def test_cdk_json_carries_every_key_with_its_default_and_the_feature_flags() -> None:
    cdk_json = json.loads((ROOT / "cdk.json").read_text())

    assert cdk_json["app"] == ".venv/bin/python -m infra.app"
    deployment = {k: v for k, v in cdk_json["context"].items() if not k.startswith("@aws-cdk")}
    assert deployment == CONTEXT_DEFAULTS


def test_deploy_doc_documents_every_key() -> None:
    doc = (ROOT / "docs" / "deploy.md").read_text()

    assert [key for key in CONTEXT_DEFAULTS if f"`{key}`" not in doc] == []


def test_defaults() -> None:
    defaults = config()

    assert defaults.stack_name == "JobRunner-dev"
    assert defaults.keyspace == "jobrunner_dev"
    assert defaults.uses_keyspaces
    assert defaults.scan_reserved_concurrency is None  # dev: a new account cannot hold a reservation
    assert config(stage="staging").scan_reserved_concurrency == scan_concurrency(16) == 36
    assert defaults.allowed_topics == ("jobs",)
    assert defaults.log_retention_name == "ONE_MONTH"


def test_command_line_strings_are_parsed() -> None:
    # Given values as `cdk deploy -c key=value` passes them: all strings
    parsed = config(segments="32", retain_data="false", allowed_topics="reports,jobs", stage="prod-eu",
                    existing_cassandra='{"contact_points": "10.0.0.1,10.0.0.2", "port": 9043}',
                    scan_reserved_concurrency="0", alarm_email="ops@example.com")

    assert parsed.segments == 32
    assert parsed.retain_data is False
    assert parsed.allowed_topics == ("jobs", "reports")
    assert parsed.keyspace == "jobrunner_prod_eu"
    assert parsed.existing_cassandra == ExistingCassandra(contact_points=("10.0.0.1", "10.0.0.2"), port=9043)
    assert not parsed.uses_keyspaces
    assert parsed.scan_reserved_concurrency is None
    assert parsed.alarm_email == "ops@example.com"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("stage", "Prod", "stage"),
    ("segments", 0, "segments"),
    ("segments", "many", "segments"),
    ("segments", True, "segments: expected a whole number"),
    ("segments", 1025, "segments: at most 1024 in one stack"),
    ("lambda_architecture", "arm", "lambda_architecture"),
    ("api_auth", "apikey", "api_auth"),
    ("keyspace", "Bad-Name", "keyspace"),
    ("allowed_topics", ["ok", "not ok"], "allowed_topics: 'not ok' is not a Kafka topic name"),
    ("tenant_topics", {"payments": ["pay/ments"]}, "tenant_topics: tenant 'payments': 'pay/ments' is not a Kafka"),
    ("tenant_topics", ["payments"], "tenant_topics: expected a JSON object, got list"),
    ("tenant_map", {CI_ROLE: 5}, f"tenant_map: principal '{CI_ROLE}': expected a tenant name"),
    ("operators", {"ops": True}, "operators"),
    ("log_retention_days", 10, "retention"),
    ("scan_reserved_concurrency", -1, "scan_reserved_concurrency"),
    ("existing_cassandra", {"contact_points": []}, "contact_points"),
    ("existing_cassandra", {"contact_points": ["h"], "secret_arn": "name"}, "secret_arn"),
    ("existing_cassandra", {"contact_points": ["h"], "user": "x"}, "unknown keys"),
    ("existing_cassandra", {"contact_points": ["h"], "port": 70000}, "existing_cassandra.port: expected a whole number "
                                                                     "of at least 1 and at most 65535"),
    ("retain_data", "yes", "retain_data"),
    ("availability_zones", ["use1-az1"], "two or more"),
    ("availability_zones", ["use1-az1", "use1-az1"], "two or more"),
    ("availability_zones", ["use1-az1", "us-east-1b"], "all zone IDs"),
])
def test_bad_values_are_rejected_with_the_key_named(key: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**{key: value})


@pytest.mark.parametrize(("segments", "expected"), [(1, 6), (16, 36), (64, 144)])
def test_scan_concurrency_is_two_per_segment_plus_headroom(segments: int, expected: int) -> None:
    assert scan_concurrency(segments) == expected


def test_kafka_client_vpcs_and_worker_groups() -> None:
    from infra.config import KafkaClientVpc

    parsed = config(kafka_client_vpcs='[{"subnet_ids": ["subnet-1", "subnet-2"], "security_group_ids": ["sg-1"]}]',
                    worker_groups="billing-workers,jobrunner-workers")

    assert parsed.kafka_client_vpcs == (KafkaClientVpc(("subnet-1", "subnet-2"), ("sg-1",)),)
    assert parsed.worker_groups == ("billing-workers", "jobrunner-workers")
    assert config().worker_groups == ("jobrunner-workers", "example-workers")


@pytest.mark.parametrize("value", [
    [{"subnet_ids": ["subnet-1"]}],                       # one zone
    [{"subnet_ids": ["subnet-1", "subnet-2"], "vpc": "x"}],
    [{"subnet_ids": ["subnet-1", "subnet-2"], "security_group_ids": ["default"]}],
    [{"subnet_ids": ["subnet-1", "subnet-2"]}] * 5,       # MSK Serverless: 5 VPCs with the stack's own
])
def test_kafka_client_vpcs_are_checked(value: Any) -> None:
    with pytest.raises(ConfigError, match="kafka_client_vpcs"):
        config(kafka_client_vpcs=value)


def test_availability_zones_take_zone_ids_or_zone_names() -> None:
    assert config(availability_zones='["use1-az4", "use1-az6"]').availability_zones == ("use1-az4", "use1-az6")
    assert config(availability_zones=["eu-west-1a", "eu-west-1c"]).availability_zones == ("eu-west-1a", "eu-west-1c")


PINNED = {"account": "123456789012", "region": "eu-west-1"}


def test_a_stage_not_listed_is_unpinned_and_unprotected() -> None:
    dev = config()

    assert (dev.account, dev.region, dev.protected) == (None, None, False)
    assert config(stage="alice").protected is False


def test_a_listed_stage_pins_its_account_and_region_and_overrides_keys() -> None:
    # Given a stage with its own account, region and settings
    stages = {"staging": {**PINNED, "segments": 8, "alarm_email": "staging@example.com"}}

    staging = config(stage="staging", stages=stages)

    assert (staging.account, staging.region, staging.protected) == ("123456789012", "eu-west-1", False)
    assert staging.segments == 8 and staging.alarm_email == "staging@example.com"
    # And a stage it does not list keeps the defaults
    assert config(stages=stages).segments == 16


def test_prod_is_protected_and_must_name_its_account_and_region() -> None:
    with pytest.raises(ConfigError, match=r"stages\.prod\.account and stages\.prod\.region"):
        config(stage="prod")
    with pytest.raises(ConfigError, match="protected"):
        config(stage="prod", stages={"prod": {"account": "123456789012"}})
    with pytest.raises(ConfigError, match="always protected"):
        config(stage="prod", stages={"prod": {**PINNED, "protected": False}})

    prod = config(stage="prod", stages={"prod": PINNED})
    assert prod.protected and (prod.account, prod.region) == ("123456789012", "eu-west-1")


def test_any_stage_marked_protected_is_held_to_the_same_rules() -> None:
    with pytest.raises(ConfigError, match=r"stages\.eu\.account"):
        config(stage="eu", stages={"eu": {"protected": True}})
    # Deletion protection on data the stack would delete with itself makes no sense: refused
    with pytest.raises(ConfigError, match="retain_data"):
        config(stage="eu", stages={"eu": {**PINNED, "protected": True, "retain_data": False}})
    assert config(stage="eu", stages={"eu": {**PINNED, "protected": True}}).protected


def test_a_key_set_both_for_the_stage_and_on_the_command_line_is_refused() -> None:
    stages = {"staging": {"segments": 8}}

    # Given -c segments=32 while stages.staging says 8: which one wins would be a guess
    with pytest.raises(ConfigError, match=r"segments: stages\.staging sets 8"):
        config(stage="staging", stages=stages, segments="32")
    # The same value, or the default, is no conflict
    assert config(stage="staging", stages=stages, segments="8").segments == 8
    assert config(stage="staging", stages=stages, segments="auto").segments == 8


@pytest.mark.parametrize(("stages", "message"), [
    ({"staging": {"acount": "123456789012"}}, "unknown keys"),
    ({"staging": {"stage": "other"}}, "unknown keys"),
    ({"staging": {"account": 123456789012}}, "12 digits"),
    ({"staging": {"account": "12345"}}, "12 digits"),
    ({"staging": {"region": "Ireland"}}, "region"),
    ({"staging": {"protected": "yes"}}, "protected"),
    ({"staging": {"segments": 0}}, "segments"),
    (["staging"], "stages"),
])
def test_bad_stage_settings_are_rejected(stages: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(stage="staging", stages=stages)


def test_stages_given_on_the_command_line_are_parsed() -> None:
    staging = config(stage="staging", stages='{"staging": {"account": "123456789012", "region": "us-east-1"}}')

    assert staging.region == "us-east-1"


def test_kafka_is_serverless_and_endpoints_in_every_zone_by_default() -> None:
    defaults = config()

    assert defaults.kafka_provisioned is None
    assert defaults.endpoint_zones is None


def test_a_provisioned_cluster_takes_defaults_for_what_it_omits() -> None:
    from infra.config import ProvisionedKafka

    assert config(kafka_provisioned={}).kafka_provisioned == ProvisionedKafka(
        instance_type="kafka.t3.small", brokers_per_zone=1, storage_gib=10, kafka_version="3.8.x")
    # Given on the command line, as a JSON string
    parsed = config(kafka_provisioned='{"instance_type": "kafka.m7g.large", "brokers_per_zone": 2, '
                                      '"storage_gib": 100, "kafka_version": "3.9.x.kraft"}')
    assert parsed.kafka_provisioned == ProvisionedKafka("kafka.m7g.large", 2, 100, "3.9.x.kraft")


@pytest.mark.parametrize(("value", "message"), [
    ("kafka.t3.small", r"kafka_provisioned: expected null or an object"),
    ({"brokers": 2}, r"kafka_provisioned: unknown keys \['brokers'\]"),
    ({"instance_type": "t3.small"}, r"kafka_provisioned\.instance_type"),
    ({"instance_type": "express.m7g.large"}, r"kafka_provisioned\.instance_type"),
    ({"brokers_per_zone": 0}, r"kafka_provisioned\.brokers_per_zone"),
    ({"brokers_per_zone": -1}, r"kafka_provisioned\.brokers_per_zone"),
    ({"brokers_per_zone": True}, r"kafka_provisioned\.brokers_per_zone"),
    ({"storage_gib": 0}, r"kafka_provisioned\.storage_gib: expected an integer in \[1, 16384\]"),
    ({"storage_gib": 16385}, r"kafka_provisioned\.storage_gib"),
    ({"storage_gib": "10"}, r"kafka_provisioned\.storage_gib"),
    ({"kafka_version": "latest"}, r"kafka_provisioned\.kafka_version"),
    ({"kafka_version": 3.8}, r"kafka_provisioned\.kafka_version"),
])
def test_bad_provisioned_clusters_are_rejected_with_the_key_named(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(kafka_provisioned=value)


def test_a_provisioned_cluster_has_no_endpoints_in_other_vpcs() -> None:
    # Given workers' VPCs reaching the cluster through its endpoints there: an MSK Serverless feature
    vpcs = [{"subnet_ids": ["subnet-1", "subnet-2"]}]

    with pytest.raises(ConfigError, match=r"kafka_provisioned: kafka_client_vpcs .* MSK Serverless"):
        config(kafka_provisioned={}, kafka_client_vpcs=vpcs)
    with pytest.raises(ConfigError, match="kafka_client_vpcs"):
        config(stage="dev", stages={"dev": {"kafka_provisioned": {}}}, kafka_client_vpcs=vpcs)


def test_a_provisioned_cluster_takes_two_or_three_zones() -> None:
    three = ["use1-az1", "use1-az2", "use1-az4"]

    assert config(kafka_provisioned={}, availability_zones=three).kafka_provisioned is not None
    with pytest.raises(ConfigError, match=r"kafka_provisioned: .* two or three zones"):
        config(kafka_provisioned={}, availability_zones=[*three, "use1-az5"])


@pytest.mark.parametrize(("context", "expected"), [
    ({"endpoint_zones": 1}, 1),
    ({"endpoint_zones": "2"}, 2),
    ({"endpoint_zones": 3, "availability_zones": ["use1-az1", "use1-az2", "use1-az4"]}, 3),
])
def test_endpoint_zones_counts_the_vpcs_first_zones(context: dict[str, Any], expected: int) -> None:
    assert config(**context).endpoint_zones == expected


@pytest.mark.parametrize("context", [
    {"endpoint_zones": 0},
    {"endpoint_zones": -1},
    {"endpoint_zones": 3},                                    # the default VPC has two zones
    {"endpoint_zones": 3, "availability_zones": ["use1-az1", "use1-az2"]},
    {"endpoint_zones": "one"},
    {"endpoint_zones": True},
])
def test_bad_endpoint_zones_are_rejected_with_the_key_named(context: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="endpoint_zones"):
        config(**context)


def test_a_cheaper_dev_stage_is_set_in_stages() -> None:
    from infra.config import ProvisionedKafka

    # Given the stages entry docs/deploy.md shows for a cheaper dev stage
    stages = {"dev": {"kafka_provisioned": {"instance_type": "kafka.t3.small", "storage_gib": 10},
                      "endpoint_zones": 1}}

    dev = config(stages=stages)

    assert dev.kafka_provisioned == ProvisionedKafka()
    assert dev.endpoint_zones == 1
    # And other stages keep MSK Serverless and endpoints in every zone
    staging = config(stage="staging", stages=stages)
    assert (staging.kafka_provisioned, staging.endpoint_zones) == (None, None)
    # And a different value on the command line is refused, as for any key a stage sets
    with pytest.raises(ConfigError, match=r"endpoint_zones: stages\.dev sets 1"):
        config(stages=stages, endpoint_zones="2")
    with pytest.raises(ConfigError, match=r"kafka_provisioned\.storage_gib"):
        config(stages={"dev": {"kafka_provisioned": {"storage_gib": 0}}})


def test_tenant_limits_are_checked_as_the_functions_read_them() -> None:
    assert config().tenant_limits == {"*": {"submissions_per_second": 25, "jobs_held": 100_000}}
    assert config(tenant_limits='{"payments": {"submissions_per_second": 200}}').tenant_limits == {
        "payments": {"submissions_per_second": 200}}
    with pytest.raises(ConfigError, match="tenant_limits: tenant 'x': payload_bytes must be between 1 and 65536"):
        config(tenant_limits={"x": {"payload_bytes": 10**6}})


def test_each_function_and_module_of_the_config_reads_in_one_sitting() -> None:
    # A cyclomatic complexity of at most 12 per function (the stage settings were 14 in one function)
    package = ROOT / "infra" / "config"
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--no-cache", "--select", "C901", "--config",
                             "lint.mccabe.max-complexity=12", str(package)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    # And no module over 450 lines (the single module had grown to 886)
    modules = {path.name: len(path.read_text().splitlines()) for path in package.glob("*.py")}
    assert "deployment.py" in modules
    assert {name: lines for name, lines in modules.items() if lines > 450} == {}


@pytest.mark.parametrize(("key", "value"), [
    # A blank tenant: cdk.json's own rule took any non-empty string, the functions refuse it at every cold start
    ("tenant_map", {CI_ROLE: " "}),
    ("tenant_map", {"": "payments"}),
    ("tenant_topics", {"payments": ["payments"], " ": ["jobs"]}),
    ("tenant_limits", {"payments": {"submissions_per_second": 0}}),
    ("segments", 0),
])
def test_a_value_the_functions_refuse_is_refused_at_synth_for_the_same_reason(key: str, value: Any) -> None:
    # Given the reason the functions' settings give for the value, written to their environment as the stack writes it
    attribute = {"tenant_limits": "tenant_limit_table"}.get(key, key)
    written = Settings.model_construct(**{attribute: value}).to_environment(given_only=True)
    with pytest.raises(SettingsError) as at_cold_start:
        Settings.from_env(written)
    [(refused_attribute, reason)] = at_cold_start.value.problems
    assert refused_attribute == attribute

    # Then synth refuses it, naming the stage, the context key and that reason
    with pytest.raises(ConfigError, match=f"^stage dev: {key}: {re.escape(reason)}$"):
        config(**{key: value})


def test_every_refused_value_is_named_with_its_stage() -> None:
    with pytest.raises(ConfigError) as refused:
        config(stage="staging", api_auth="apikey", kafka_partitions=0, lambda_architecture="arm",
               api_principals=[CI_ROLE])

    assert str(refused.value).splitlines() == [
        "stage staging: lambda_architecture: expected one of arm64, x86_64, got 'arm'",
        "stage staging: api_auth: expected one of iam, cognito, got 'apikey'",
        "stage staging: kafka_partitions: expected an integer in [1, 200], got 0",
    ]


def test_the_functions_are_handed_the_settings_the_context_gives() -> None:
    parsed = config(segments=8, allowed_topics="reports", tenant_map={CI_ROLE: " ci "}, operators="ci",
                    existing_cassandra={"contact_points": "10.0.0.1, 10.0.0.2", "port": 9043})

    # Read back as the functions read them: trimmed, split, with the default topic first
    assert parsed.settings == Settings.of(
        segments=8, topic="jobs", allowed_topics=("jobs", "reports"), tenant_map={CI_ROLE: "ci"}, operators=("ci",),
        tenant_limit_table={"*": {"submissions_per_second": 25, "jobs_held": 100_000}},
        contact_points=("10.0.0.1", "10.0.0.2"), cassandra_port=9043, target_kinds=("none",))
    assert (parsed.segments, parsed.allowed_topics, parsed.tenant_map, parsed.operators) == (
        8, ("jobs", "reports"), ((CI_ROLE, "ci"),), ("ci",))
    assert parsed.existing_cassandra == ExistingCassandra(contact_points=("10.0.0.1", "10.0.0.2"), port=9043)


@pytest.mark.parametrize("stage", ["staging", "prod", "alice"])
def test_a_stage_other_than_dev_without_an_alarm_subscriber_is_refused(stage: str) -> None:
    # Given a stage whose alarms would notify a topic nobody reads
    stages = {stage: {**PINNED}} if stage == "prod" else {}

    with pytest.raises(ConfigError, match=rf"alarm_email: stage {stage} .* nobody.*stages\.{stage}\.alarm_email"):
        DeploymentConfig.from_context({"stage": stage, "stages": stages}.get)
    # And a subscriber given for the stage, or on the command line, is enough
    given = {stage: {**PINNED, "alarm_email": "ops@example.com", "api_principals": [CI_ROLE]}}
    assert DeploymentConfig.from_context({"stage": stage, "stages": given}.get).alarm_email == "ops@example.com"
    if stage != "prod":
        assert config(stage=stage, alarm_email="ops@example.com").alarm_email == "ops@example.com"
    # But dev, a developer's own stage, may go without
    assert config().alarm_email is None


@pytest.mark.parametrize("value", ["oncall", "oncall@", "@example.com", "a b@example.com", ["ops@example.com"]])
def test_a_malformed_alarm_email_is_refused(value: Any) -> None:
    with pytest.raises(ConfigError, match="alarm_email"):
        config(alarm_email=value)


def test_cdk_json_leaves_prods_subscriber_to_fill_in_like_its_account() -> None:
    prod = json.loads((ROOT / "cdk.json").read_text())["context"]["stages"]["prod"]

    assert prod == {"account": None, "region": None, "protected": True, "alarm_email": None, "api_principals": [],
                    "expected_executions_per_day": 50_000_000,
                    "kafka_provisioned": {"instance_type": "kafka.m7g.large", "brokers_per_zone": 1}}
    # Once its account and region are filled in, prod still refuses to synth without a subscriber
    with pytest.raises(ConfigError, match=r"stages\.prod\.alarm_email"):
        DeploymentConfig.from_context({"stage": "prod", "stages": {"prod": {**prod, **PINNED}}}.get)
    # Nor without the principals that may call its API
    with pytest.raises(ConfigError, match=r"stages\.prod\.api_principals"):
        DeploymentConfig.from_context({"stage": "prod", "stages": {"prod": {
            **prod, **PINNED, "alarm_email": "oncall@example.com"}}}.get)


def test_the_web_dashboard_is_on_unless_a_stage_turns_it_off() -> None:
    assert config().web_dashboard is True
    url = "https://github.com/acme/jobrunner/blob/main/docs/runbooks.md"
    assert config(web_dashboard="false", runbook_url=url).web_dashboard is False
    assert config(stages={"dev": {"web_dashboard": False, "runbook_url": url}}).web_dashboard is False
    with pytest.raises(ConfigError, match="web_dashboard"):
        config(web_dashboard="no")


def test_runbooks_are_linked_by_an_https_url_the_web_dashboards_copy_by_default() -> None:
    url = "https://github.com/acme/jobrunner/blob/main/docs/runbooks.md"

    assert config().runbook_url is None  # the web dashboard serves them
    assert config(runbook_url=url).runbook_url == url
    assert config(stage="staging", stages={"staging": {"runbook_url": url}}).runbook_url == url
    assert config(web_dashboard="false", runbook_url=url).runbook_url == url


@pytest.mark.parametrize(("context", "message"), [
    ({"runbook_url": "docs/runbooks.md"}, "https URL"),                     # a path in the checkout
    ({"runbook_url": "http://wiki.example.com/runbooks"}, "https URL"),
    ({"runbook_url": "https://example.com/runbooks.md#watermarklag"}, "#fragment"),
    ({"runbook_url": "https://"}, "https URL"),
    ({"web_dashboard": False}, "with web_dashboard false .* set runbook_url"),
])
def test_runbook_links_a_person_cannot_open_are_refused(context: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=f"runbook_url: .*{message}"):
        config(**context)


def test_a_retained_keyspace_may_be_adopted_on_keyspaces_only() -> None:
    assert config().adopt_keyspace is False
    assert config(adopt_keyspace="true").adopt_keyspace is True
    with pytest.raises(ConfigError, match=r"adopt_keyspace: .*Amazon Keyspaces"):
        config(adopt_keyspace=True, existing_cassandra={"contact_points": ["10.0.0.1"]})
    with pytest.raises(ConfigError, match="adopt_keyspace"):
        config(adopt_keyspace="yes")


def test_a_stage_other_than_dev_must_list_who_may_call_its_api() -> None:
    # Given staging with IAM auth and no allow-list: every principal of its account would be a tenant
    with pytest.raises(ConfigError, match=r"api_principals: stage staging .*stages\.staging\.api_principals"):
        config(stage="staging", api_principals=[])
    # And dev, a developer's own stage, admits the deploying account by default (the resource policy names it)
    assert config().api_principals == ()
    # But with Cognito the user pool admits the tenants: an allow-list of IAM principals means nothing there
    assert config(stage="staging", api_auth="cognito", tenant_topics={"*": ["jobs"]}).api_principals == ()
    with pytest.raises(ConfigError, match="api_principals: with api_auth cognito"):
        config(api_auth="cognito", api_principals=[CI_ROLE], tenant_topics={"*": ["jobs"]})


def test_api_principals_take_accounts_and_roles_or_users() -> None:
    parsed = config(api_principals='123456789012,arn:aws:iam::210987654321:root,'
                                   'arn:aws:iam::123456789012:role/team/payments-ci,arn:aws:iam::123456789012:user/bob',
                    shared_worker_topics=True)

    # An account's root ARN is the account: any principal of it that its own IAM policies allow
    assert parsed.api_principals == ("123456789012", "210987654321", "arn:aws:iam::123456789012:role/team/payments-ci",
                                     "arn:aws:iam::123456789012:user/bob")


@pytest.mark.parametrize("entry", [
    "*", "12345", "arn:aws:sts::123456789012:assumed-role/ci/session-1", "arn:aws:iam::123456789012:role/",
    "arn:aws:iam::123456789012:group/devs", "arn:aws:iam::123456789012:root/x",
])
def test_an_api_principal_that_is_no_account_role_or_user_is_refused(entry: str) -> None:
    with pytest.raises(ConfigError, match=r"api_principals: .* neither an account ID"):
        config(stage="staging", api_principals=[entry])


def test_a_mapped_principal_must_be_admitted() -> None:
    mapped = {"arn:aws:iam::123456789012:role/payments-ci": "payments"}

    # Given a principal mapped to a tenant that the allow-list does not admit: the API would refuse it
    with pytest.raises(ConfigError, match="tenant_map maps 'arn:aws:iam::123456789012:role/payments-ci'"):
        config(stage="staging", tenant_map=mapped, api_principals=[CI_ROLE])
    # Its role (with its path: the allow-list is matched against the role's full ARN), or its account, admits it
    assert config(stage="staging", tenant_map=mapped, shared_worker_topics=True,
                  api_principals=[CI_ROLE, "arn:aws:iam::123456789012:role/team/payments-ci"]).tenant_map
    assert config(stage="staging", tenant_map=mapped, api_principals=["123456789012"], shared_worker_topics=True)


@pytest.mark.parametrize(("context", "why"), [
    ({"api_auth": "cognito"}, "every user of the pool"),
    ({"api_principals": ["123456789012"]}, "admits account 123456789012"),
    ({"api_principals": [CI_ROLE, "arn:aws:iam::123456789012:role/payments-ci"]}, "name 2 tenants"),
    ({"tenant_map": {CI_ROLE: "ci"}, "tenant_limits": {"*": {}, "payments": {"jobs_held": 10}}}, "name 2 tenants"),
])
def test_a_stage_of_several_tenants_refuses_the_shared_jobs_topic(context: dict[str, Any], why: str) -> None:
    # Given a stage admitting several tenants and no tenant_topics: every tenant's executions on one topic
    with pytest.raises(ConfigError, match=rf"tenant_topics: stage staging admits more than one tenant \(.*{why}.*"
                                          r"stages\.staging\.tenant_topics.*shared_worker_topics"):
        config(stage="staging", **context)

    # Then topics per tenant, or the explicit opt-out, let it deploy
    assert config(stage="staging", tenant_topics={"payments": ["payments"]}, **context).tenant_topics
    assert config(stage="staging", shared_worker_topics="true", **context).shared_worker_topics is True


def test_one_tenant_or_devs_own_account_may_share_the_jobs_topic() -> None:
    # One role, mapped or not, is one tenant
    assert config(stage="staging").tenant_topics == ()
    assert config(stage="staging", tenant_map={CI_ROLE: "ci"}, operators=["ci"]).tenant_topics == ()
    # dev's default admits the developer's own account
    assert config().shared_worker_topics is False


def test_the_web_acl_is_on_for_protected_stages_unless_set() -> None:
    prod = {"stage": "prod", "stages": {"prod": {**PINNED, "protected": True}}}

    # "auto": a protected stage gets one, each source IP kept to half the stage's throttle over 5 minutes
    assert config(**prod).waf_rate_limit == 50 * 300 // 2
    assert config(**prod, api_rate_limit=100).waf_rate_limit == 15_000
    assert config().waf_rate_limit is None
    assert config(stage="staging").waf_rate_limit is None
    # A number turns it on anywhere; 0 turns it off
    assert config(waf_rate_limit="2000").waf_rate_limit == 2000
    assert config(**prod, waf_rate_limit=0).waf_rate_limit is None
    for bad in (5, -1, "on", True):
        with pytest.raises(ConfigError, match="waf_rate_limit"):
            config(waf_rate_limit=bad)


CERTIFICATE = "arn:aws:acm:{region}:123456789012:certificate/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"


def test_custom_domains_take_a_certificate_of_the_region_that_serves_them() -> None:
    from infra.config import CustomDomain

    us_east_1, eu_west_1 = CERTIFICATE.format(region="us-east-1"), CERTIFICATE.format(region="eu-west-1")
    dashboard = {"domain_name": "jobs.example.com", "certificate_arn": us_east_1}
    api = {"domain_name": "api.jobs.example.com", "certificate_arn": eu_west_1}
    pinned = {"stage": "staging", "stages": {"staging": {**PINNED}}}

    parsed = config(**pinned, dashboard_domain=dashboard, api_domain=json.dumps(api))
    assert parsed.dashboard_domain == CustomDomain("jobs.example.com", us_east_1)
    assert parsed.api_domain == CustomDomain("api.jobs.example.com", eu_west_1)
    assert config().dashboard_domain is None and config().api_domain is None
    # CloudFront takes certificates from us-east-1 only; the regional API from its own region
    with pytest.raises(ConfigError, match=r"dashboard_domain.certificate_arn: .* eu-west-1"):
        config(dashboard_domain={**dashboard, "certificate_arn": eu_west_1})
    with pytest.raises(ConfigError, match=r"api_domain.certificate_arn: .* us-east-1; .* eu-west-1"):
        config(**pinned, api_domain={**api, "certificate_arn": us_east_1})
    with pytest.raises(ConfigError, match="dashboard_domain: with web_dashboard false"):
        config(dashboard_domain=dashboard, web_dashboard=False,
               runbook_url="https://github.com/acme/jobrunner/blob/main/docs/runbooks.md")
    for bad in ({"domain_name": "Jobs.Example.com", "certificate_arn": us_east_1},
                {"domain_name": "jobs.example.com", "certificate_arn": "arn:aws:iam::123456789012:role/x"},
                {"domain_name": "jobs.example.com"}, "jobs.example.com"):
        with pytest.raises(ConfigError, match="dashboard_domain"):
            config(dashboard_domain=bad)


def test_the_shared_worker_policy_reads_the_topics_no_tenant_has_to_itself() -> None:
    # Given payments with a topic of its own, and jobs shared with every other tenant
    parsed = config(allowed_topics=["jobs", "reports"], tenant_topics={"payments": ["payments", "jobs"],
                                                                        "*": ["jobs"]})

    assert parsed.allowed_topics == ("jobs", "reports", "payments")
    assert parsed.shared_topics == ("jobs", "reports")
    # Without grants every allowed topic is shared; a topic only named tenants hold is nobody else's
    assert config(allowed_topics=["jobs", "reports"]).shared_topics == ("jobs", "reports")
    assert config(tenant_topics={"a": ["jobs"], "b": ["b"]}).shared_topics == ()


def test_a_stage_names_its_stack_and_the_region_stages_pins_it_to() -> None:
    context = {"stages": {"prod": {"region": "eu-west-1"}, "qa": {"segments": 4}}}
    config = DeploymentConfig.from_context(
        {"stage": "qa", "alarm_email": "qa@example.com", "api_principals": [CI_ROLE]}.get)
    assert config.stack_name == stack_name_of("qa") == "JobRunner-qa"
    assert [stage_region(context, s) for s in ("prod", "qa", "dev")] == ["eu-west-1", None, None]


# Cost levers (issue #33)

@pytest.mark.parametrize(("per_day", "segments", "partitions", "pollers"), [
    (None, 16, 3, 3),  # a stage that does not say its rate keeps the values before issue #33
    (1_000_000, 1, 3, 0),
    (10_000_000, 1, 3, 0),
    (50_000_000, 8, 5, 5),
    (1_000_000_000, 128, 87, 87),
])
def test_segments_partitions_and_pollers_follow_the_expected_rate(
        per_day: int | None, segments: int, partitions: int, pollers: int) -> None:
    sized = config(expected_executions_per_day=per_day)

    assert (sized.segments, sized.kafka_partitions, sized.results_pollers) == (segments, partitions, pollers)


@pytest.mark.parametrize("per_day", [0, -5, True, "many", 1.5, 100_000_000_001])
def test_an_expected_rate_that_is_no_whole_number_of_executions_is_refused_before_it_sizes_anything(
        per_day: Any) -> None:
    # The refusal names the option, not the segments "auto" would have sized from it
    with pytest.raises(ConfigError, match=r"^stage dev: expected_executions_per_day: expected an integer") as caught:
        config(expected_executions_per_day=per_day)
    assert "segments" not in str(caught.value)


def test_segments_sized_from_the_rate_are_what_the_functions_read() -> None:
    sized = config(expected_executions_per_day=50_000_000, scan_memory_mb=1769)

    # A whole vCPU publishes more a scan: fewer segments than at 512 MB, handed to the functions as a number
    assert (sized.segments, config(expected_executions_per_day=50_000_000).segments) == (2, 8)
    assert sized.settings.segments == 2
    with pytest.raises(ConfigError, match=r"scan_memory_mb"):
        config(expected_executions_per_day=50_000_000, scan_memory_mb=64)


def test_segments_and_partitions_given_explicitly_win_over_the_expected_rate() -> None:
    sized = config(expected_executions_per_day="1000000", segments="4", kafka_partitions="6", results_pollers="2")

    assert (sized.segments, sized.kafka_partitions, sized.results_pollers) == (4, 6, 2)
    with pytest.raises(ConfigError, match="results_pollers"):
        config(kafka_partitions=3, results_pollers=4)


def test_point_in_time_recovery_covers_the_tables_nothing_rebuilds() -> None:
    assert config().point_in_time_recovery == ("job_table_v2", "calendars", "task_history_v2", "job_changes")
    assert config(point_in_time_recovery='["job_table_v2"]').point_in_time_recovery == ("job_table_v2",)
    with pytest.raises(ConfigError, match="point_in_time_recovery"):
        config(point_in_time_recovery="everything!")


def test_a_protected_stage_that_says_its_rate_gets_provisioned_capacity() -> None:
    prod = {"prod": {**PINNED, "expected_executions_per_day": 50_000_000}}

    assert config(stage="prod", stages=prod).keyspaces_capacity == "provisioned"
    assert config(stage="prod", stages={"prod": PINNED}).keyspaces_capacity == "on-demand"  # no rate to size for
    assert config(expected_executions_per_day=50_000_000).keyspaces_capacity == "on-demand"  # dev
    chosen = config(keyspaces_capacity="provisioned", expected_executions_per_day=1000)
    assert chosen.keyspaces_capacity == "provisioned"
    with pytest.raises(ConfigError, match="expected_executions_per_day"):
        config(keyspaces_capacity="provisioned")


def test_logs_and_traces_are_sampled_by_default() -> None:
    assert (config().results_log_sample_rate, config().xray_tracing) == (0.01, "sampled")
    assert config(results_log_sample_rate="1").results_log_sample_rate == 1.0
    assert config(results_log_sample_rate="0.05").results_log_sample_rate == 0.05
    for key, value in (("results_log_sample_rate", 2), ("xray_tracing", "some")):
        with pytest.raises(ConfigError, match=key):
            config(**{key: value})


def test_the_small_tier_is_a_stage_of_cdk_json() -> None:
    from infra.config import ProvisionedKafka, cli_context

    context = cli_context(ROOT / "cdk.json", ["-c", "stage=small"])
    # Given its subscriber and callers filled in, as for prod
    context["stages"]["small"].update(alarm_email="oncall@example.com", api_principals=[CI_ROLE])
    small = config(**{k: v for k, v in context.items() if not k.startswith("@")})

    assert (small.segments, small.kafka_partitions, small.results_pollers) == (1, 3, 0)
    assert small.kafka_provisioned == ProvisionedKafka(instance_type="kafka.t3.small", brokers_per_zone=1)
    assert (small.endpoint_zones, small.xray_tracing, small.keyspaces_capacity) == (1, "off", "on-demand")


# Targets (issue 35) ----------------------------------------------------------------------------------------------


def test_targets_are_off_by_default_and_the_functions_then_allow_no_kind() -> None:
    stage = config()

    assert stage.targets is None
    assert stage.settings.target_kinds == ("none",)
    assert Settings.from_env(stage.settings.to_environment(given_only=True)).target_grants.kinds == frozenset()


def test_targets_on_give_the_functions_the_kinds_and_allow_lists_as_they_read_them() -> None:
    function = "arn:aws:lambda:eu-west-1:123456789012:function:reports"
    stage = config(targets={"kinds": ["https", "lambda"], "lambda_allow": [function, "210987654321"],
                            "address_allow": ["10.9.0.0/16"]})

    assert stage.targets is not None and stage.targets.https
    assert stage.targets.lambda_allow == (function, "210987654321")
    settings = Settings.from_env(stage.settings.to_environment(given_only=True))
    assert (settings.target_kinds, settings.target_lambda_allow, settings.target_sqs_allow,
            settings.target_address_allow) == (("https", "lambda"), (function, "210987654321"), (), ("10.9.0.0/16",))


def test_targets_given_on_the_command_line_are_read_as_json() -> None:
    stage = config(targets='{"kinds": ["sqs"], "sqs_allow": "123456789012"}')

    assert stage.targets is not None and not stage.targets.https
    assert stage.settings.target_sqs_allow == ("123456789012",)


@pytest.mark.parametrize(("targets", "reason"), [
    ({"kinds": []}, "targets.kinds: expected one or more of https, lambda, sqs"),
    ({"kinds": ["none"]}, "targets.kinds: expected one or more"),
    ({"kinds": ["ftp"]}, "targets.kinds: not a kind of target: ftp"),
    ({"kinds": ["sqs"], "sqs_allow": ["queue"]}, "targets.sqs_allow: 'queue' is neither"),
    ({"kinds": ["lambda"], "lambda_allow": ["arn:aws:lambda:eu-west-1:1:function:f"]}, "targets.lambda_allow"),
    ({"kinds": ["https"], "address_allow": ["10.0.0.0/33"]}, "targets.address_allow: not a network"),
    ({"kinds": ["https"], "allow": []}, "unknown keys ['allow']"),
    ("https", "expected null or an object"),
    # anyone's functions or queues only in writing
    ({"kinds": ["lambda"], "lambda_allow": ["*"]}, "lambda_allow holds *"),
    ({"kinds": ["sqs"], "sqs_allow": ["123456789012", "*"]}, "sqs_allow holds *"),
    ({"kinds": ["sqs"], "sqs_allow": ["*"], "allow_any": "yes"}, "targets.allow_any: expected true or false"),
])
def test_targets_refused_name_the_key_and_the_reason(targets: Any, reason: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(reason)):
        config(targets=targets)


def test_a_star_is_allowed_when_the_stage_says_so() -> None:
    stage = config(targets={"kinds": ["lambda", "sqs"], "lambda_allow": ["*"], "sqs_allow": ["*"], "allow_any": True})

    assert stage.settings.target_lambda_allow == ("*",) and stage.settings.target_sqs_allow == ("*",)
