"""The preflight: the account's Lambda concurrency against what the stack reserves and needs.

moto does not implement ``GetAccountSettings`` (it answers 404), so the Lambda client is botocore's,
with its answers stubbed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.stub import Stubber

from infra.config import DeploymentConfig
from infra.preflight import (
    QUOTA_CODE,
    AccountConcurrency,
    admission_problems,
    certificate_problems,
    cloudfront_problems,
    keyspace_problems,
    main,
    problems,
    zone_problems,
)

if TYPE_CHECKING:
    from typing import Any


def config(**context: Any) -> DeploymentConfig:
    if context.get("stage", "dev") != "dev":
        context.setdefault("alarm_email", "oncall@example.com")
        context.setdefault("api_principals", ["arn:aws:iam::123456789012:role/ci"])
    return DeploymentConfig.from_context(context.get)


NEW_ACCOUNT = AccountConcurrency(limit=10, unreserved=10)
RAISED = AccountConcurrency(limit=1000, unreserved=1000)


def test_the_dev_defaults_reserve_nothing_a_new_account_cannot_hold() -> None:
    (found,) = problems(config(), NEW_ACCOUNT, "eu-west-1")

    # Then the deploy goes through; the user is warned that 16 segments will be throttled at 10
    assert not found.blocking
    assert "16 segments need about 42" in found.text and "-c segments=N" in found.text
    assert f"--quota-code {QUOTA_CODE}" in found.text


def test_a_stage_with_targets_counts_the_delivery_function_one_invocation_per_partition() -> None:
    # Given dev's 16 segments (42 at once without targets) and targets on, over 3 partitions of job-deliveries
    stage = config(targets={"kinds": ["https"]})
    (found,) = problems(stage, NEW_ACCOUNT, "eu-west-1")
    # Then the delivery function's 3 invocations at once are counted too, in the need and in the advice
    assert "16 segments need about 45" in found.text and "needs about 2N + 13" in found.text
    assert problems(stage, AccountConcurrency(limit=44, unreserved=44), "eu-west-1") != []
    assert problems(config(), AccountConcurrency(limit=44, unreserved=44), "eu-west-1") == []


def test_a_reservation_on_a_new_account_is_refused_naming_the_quota_and_the_fix() -> None:
    # Given a stage other than dev (auto reserves 36) on an account whose quota is still 10
    (reservation, throttling) = problems(config(stage="staging"), NEW_ACCOUNT, "eu-west-1")

    assert reservation.blocking and not throttling.blocking
    assert "scan_reserved_concurrency=36" in reservation.text and "100 unreserved" in reservation.text
    assert f"--quota-code {QUOTA_CODE}" in reservation.text and "--region eu-west-1" in reservation.text
    assert "-c scan_reserved_concurrency=0" in reservation.text


def test_a_raised_quota_passes_and_a_redeploy_counts_its_own_reservation() -> None:
    assert problems(config(stage="staging"), RAISED, "eu-west-1") == []
    # 130 of 200 already reserved by this stack's scans: raising to 144 leaves 200 - 144 = 56 < 100
    tight = AccountConcurrency(limit=200, unreserved=70, own_reservation=130)
    (found,) = problems(config(stage="staging", segments=64), tight, "eu-west-1")
    assert found.blocking and "would leave 56" in found.text


STAGING = ["-c", "stage=staging", "-c", "alarm_email=oncall@example.com",
           "-c", "api_principals=arn:aws:iam::123456789012:role/ci"]


@pytest.mark.parametrize(("argv", "limit", "status"), [
    ([], 10, 0),                      # dev: no reservation; deploys, with a warning
    ([*STAGING], 10, 1),    # the reservation would fail the deploy
    ([*STAGING], 1000, 0),
])
def test_main_reads_the_account_and_the_context(argv: list[str], limit: int, status: int,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    client = boto3.client("lambda", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("get_account_settings", {
            "AccountLimit": {"ConcurrentExecutions": limit, "UnreservedConcurrentExecutions": limit},
            "AccountUsage": {"FunctionCount": 0},
        })
        assert main(argv, lambda_client=client) == status

    err = capsys.readouterr().err
    assert ("preflight: error:" in err) == (status == 1)
    assert (QUOTA_CODE in err) == (limit == 10)


EU_WEST_1 = {"eu-west-1a": "euw1-az3", "eu-west-1b": "euw1-az1", "eu-west-1c": "euw1-az2"}


def test_the_default_zones_pass_when_they_exist_and_offer_the_keyspaces_endpoint() -> None:
    assert zone_problems(config(), "eu-west-1", EU_WEST_1, ["eu-west-1a", "eu-west-1b", "eu-west-1c"]) == []


def test_a_zone_without_the_keyspaces_endpoint_is_refused_naming_the_zone_and_the_fix() -> None:
    # Given an account where the endpoint is offered in euw1-az3 and euw1-az1 only
    (found,) = zone_problems(config(), "eu-west-1", EU_WEST_1, ["eu-west-1a", "eu-west-1b"])

    assert found.blocking
    assert "euw1-az2" in found.text and "availability_zones" in found.text


def test_pinned_zones_are_checked_by_id_and_by_name_and_regions_without_defaults_are_refused() -> None:
    assert zone_problems(config(availability_zones=["eu-west-1a", "eu-west-1c"]), "eu-west-1", EU_WEST_1,
                         list(EU_WEST_1)) == []
    (missing,) = zone_problems(config(availability_zones=["euw1-az1", "euw1-az9"]), "eu-west-1", EU_WEST_1,
                               list(EU_WEST_1))
    assert missing.blocking and "euw1-az9 does not exist" in missing.text
    (unknown,) = zone_problems(config(), "me-central-1", {}, [])
    assert unknown.blocking and "ZONE_IDS" in unknown.text


def test_main_checks_the_zones_with_the_ec2_client(capsys: pytest.CaptureFixture[str]) -> None:
    keys = {"region_name": "eu-west-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}
    lambda_client, ec2_client = boto3.client("lambda", **keys), boto3.client("ec2", **keys)
    with Stubber(lambda_client) as lambdas, Stubber(ec2_client) as ec2:
        lambdas.add_response("get_account_settings", {
            "AccountLimit": {"ConcurrentExecutions": 1000, "UnreservedConcurrentExecutions": 1000},
            "AccountUsage": {"FunctionCount": 0}})
        ec2.add_response("describe_availability_zones", {"AvailabilityZones": [
            {"ZoneName": name, "ZoneId": zone_id} for name, zone_id in EU_WEST_1.items()]})
        ec2.add_response("describe_vpc_endpoint_services", {"ServiceDetails": [
            {"ServiceName": "com.amazonaws.eu-west-1.cassandra", "AvailabilityZones": ["eu-west-1a"]}]},
            {"ServiceNames": ["com.amazonaws.eu-west-1.cassandra"]})

        assert main([], lambda_client=lambda_client, ec2_client=ec2_client) == 1

    assert "Keyspaces VPC endpoint is not offered in zone euw1-az1" in capsys.readouterr().err


PROD = ["-c", "stage=prod", "-c",
        'stages={"prod": {"account": "123456789012", "region": "eu-west-1", "alarm_email": "oncall@example.com", '
        '"api_principals": ["arn:aws:iam::123456789012:role/ci"]}}']


def _lambda_client(region: str, limit: int = 1000) -> tuple[Any, Stubber]:
    client = boto3.client("lambda", region_name=region, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_response("get_account_settings", {
        "AccountLimit": {"ConcurrentExecutions": limit, "UnreservedConcurrentExecutions": limit},
        "AccountUsage": {"FunctionCount": 0}})
    return client, stub


@pytest.mark.parametrize(("caller", "region", "status", "message"), [
    ("123456789012", "eu-west-1", 0, None),
    ("210987654321", "eu-west-1", 1, "credentials are for 210987654321"),
    ("123456789012", "us-east-1", 1, "deploys to eu-west-1"),
])
def test_a_pinned_stage_is_checked_in_its_own_account_and_region(
    caller: str, region: str, status: int, message: str | None, capsys: pytest.CaptureFixture[str],
) -> None:
    lambda_client, lambdas = _lambda_client(region)
    sts = boto3.client("sts", region_name=region, aws_access_key_id="x", aws_secret_access_key="x")
    with lambdas, Stubber(sts) as identity:
        identity.add_response("get_caller_identity", {"Account": caller, "Arn": "arn:aws:iam::x:user/u",
                                                      "UserId": "u"})
        assert main(PROD, lambda_client=lambda_client, sts_client=sts) == status

    err = capsys.readouterr().err
    assert (message in err) if message else "error" not in err


def test_prod_without_its_account_and_region_is_refused_before_any_call(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-c", "stage=prod"]) == 1
    assert "stages.prod.account and stages.prod.region" in capsys.readouterr().err


def test_a_stage_without_an_alarm_subscriber_is_refused_before_any_call(capsys: pytest.CaptureFixture[str]) -> None:
    # Given staging without alarm_email: its alarms would reach nobody (no client given: none may be called)
    assert main(["-c", "stage=staging"]) == 1

    assert "alarm_email: stage staging" in capsys.readouterr().err


def test_dev_without_a_subscriber_deploys_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    lambda_client, lambdas = _lambda_client("eu-west-1")
    with lambdas:
        assert main([], lambda_client=lambda_client) == 0

    err = capsys.readouterr().err
    assert "preflight: warning: stage dev has no alarm_email" in err
    assert "-c alarm_email=" in err


def _cloudfront_client(distributions: int | None) -> tuple[Any, Stubber]:
    """A CloudFront client whose account holds ``distributions`` (None: no call expected)."""
    client = boto3.client("cloudfront", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    if distributions is not None:
        stub.add_response("list_distributions", {"DistributionList": {
            "Marker": "", "MaxItems": 1, "IsTruncated": distributions > 1, "Quantity": min(distributions, 1)}},
            {"MaxItems": "1"})
    return client, stub


def test_an_account_without_any_distribution_is_warned_before_cloudfront_refuses_it() -> None:
    # Given an account that never created a distribution: a new one, which CloudFront may not have verified
    (found,) = cloudfront_problems(config(), has_distributions=False)

    # Then the user learns it before the stack waits for MSK, and how to deploy without the distribution
    assert not found.blocking
    assert "must be verified" in found.text and "AWS Support" in found.text
    assert "-c web_dashboard=false" in found.text
    # And an account that holds one, or a stage without the web dashboard, has nothing to fear
    assert cloudfront_problems(config(), has_distributions=True) == []
    assert cloudfront_problems(config(web_dashboard=False, runbook_url="https://example.com/runbooks.md"),
                               has_distributions=False) == []


@pytest.mark.parametrize(("argv", "distributions", "warned"), [
    ([], 0, True),
    ([], 3, False),
    # no distribution to create: CloudFront is not asked
    (["-c", "web_dashboard=false", "-c", "runbook_url=https://example.com/runbooks.md"], None, False),
])
def test_main_asks_cloudfront_whether_the_account_holds_a_distribution(
    argv: list[str], distributions: int | None, warned: bool, capsys: pytest.CaptureFixture[str],
) -> None:
    lambda_client, lambdas = _lambda_client("eu-west-1")
    cloudfront, distributions_stub = _cloudfront_client(distributions)
    with lambdas, distributions_stub:
        assert main([*argv, "-c", "alarm_email=dev@example.com"], lambda_client=lambda_client,
                    cloudfront_client=cloudfront) == 0
        distributions_stub.assert_no_pending_responses()

    assert ("web_dashboard=false" in capsys.readouterr().err) == warned


CQL_TABLES = ("job_table_v2", "task_schedule_v2", "task_history_v2", "job_idempotency", "job_changes", "calendars")


@pytest.mark.parametrize(("adopt", "exists", "owned", "tables", "blocking", "says"), [
    (False, False, False, None, None, None),               # a first deploy: the stack creates it
    (False, True, True, None, None, None),                 # a redeploy: the stack's own
    # a keyspace left by retain_data after cdk destroy: CloudFormation would fail with "already exists"
    (False, True, False, None, True, "-c adopt_keyspace=true"),
    (True, True, False, CQL_TABLES, None, None),           # adopted, every table of cql/ there
    (True, True, False, CQL_TABLES[:-1], True, "calendars"),
    (True, False, False, None, True, "no keyspace jobrunner_dev to adopt"),
    (True, True, True, None, True, "already the stack's"),
])
def test_a_keyspace_left_behind_is_found_before_cloudformation_fails_on_it(
    adopt: bool, exists: bool, owned: bool, tables: tuple[str, ...] | None, blocking: bool | None, says: str | None,
) -> None:
    found = keyspace_problems(config(adopt_keyspace=adopt), exists=exists, owned=owned,
                              tables=set(tables) if tables is not None else None, wanted=CQL_TABLES)

    assert [f.blocking for f in found] == ([] if blocking is None else [blocking])
    assert all(says in f.text for f in found)


def test_a_retained_keyspace_names_both_ways_out(capsys: pytest.CaptureFixture[str]) -> None:
    (found,) = keyspace_problems(config(stage="staging"), exists=True, owned=False, tables=None, wanted=CQL_TABLES)

    assert "jobrunner_staging already exists" in found.text and "retain_data" in found.text
    assert "stages.staging.adopt_keyspace" in found.text
    assert "aws keyspaces delete-keyspace --keyspace-name jobrunner_staging" in found.text


def _keyspaces_client(keyspace: str | None, tables: tuple[str, ...] = ()) -> tuple[Any, Stubber]:
    client = boto3.client("keyspaces", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    if keyspace is None:
        stub.add_client_error("get_keyspace", "ResourceNotFoundException", "not found",
                              expected_params={"keyspaceName": "jobrunner_dev"})
    else:
        stub.add_response("get_keyspace", {
            "keyspaceName": keyspace, "replicationStrategy": "SINGLE_REGION",
            "resourceArn": f"arn:aws:cassandra:eu-west-1:123456789012:/keyspace/{keyspace}/"},
            {"keyspaceName": keyspace})
    if tables:  # two pages
        arn = "arn:aws:cassandra:eu-west-1:123456789012:/keyspace/jobrunner_dev/table/"
        pages = [tables[:2], tables[2:]]
        for index, page in enumerate(pages):
            response: dict[str, Any] = {"tables": [
                {"keyspaceName": "jobrunner_dev", "tableName": t, "resourceArn": arn + t} for t in page]}
            params: dict[str, Any] = {"keyspaceName": "jobrunner_dev"}
            if index < len(pages) - 1:
                response["nextToken"] = f"page{index + 1}"
            if index:
                params["nextToken"] = f"page{index}"
            stub.add_response("list_tables", response, params)
    return client, stub


def _cloudformation_client(keyspace: str | None) -> tuple[Any, Stubber]:
    """The stack's resources: none (it does not exist) when ``keyspace`` is None, else with that keyspace."""
    client = boto3.client("cloudformation", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    if keyspace is None:
        stub.add_client_error("list_stack_resources", "ValidationError", "Stack with id JobRunner-dev does not exist",
                              expected_params={"StackName": "JobRunner-dev"})
    else:
        stub.add_response("list_stack_resources", {"StackResourceSummaries": [
            {"LogicalResourceId": "KeyspacesKeyspace0A1B2C3D", "PhysicalResourceId": keyspace,
             "ResourceType": "AWS::Cassandra::Keyspace", "LastUpdatedTimestamp": "2026-11-22T08:00:00Z",
             "ResourceStatus": "CREATE_COMPLETE"}]}, {"StackName": "JobRunner-dev"})
    return client, stub


@pytest.mark.parametrize(("argv", "keyspace", "stack_holds", "tables", "status", "says"), [
    # After cdk destroy with retain_data: the keyspace is there, the stack is not
    ([], "jobrunner_dev", None, (), 1, "aws keyspaces delete-keyspace --keyspace-name jobrunner_dev"),
    (["-c", "adopt_keyspace=true"], "jobrunner_dev", None, CQL_TABLES, 0, None),
    (["-c", "adopt_keyspace=true"], "jobrunner_dev", None, CQL_TABLES[1:], 1, "job_table_v2"),
    ([], "jobrunner_dev", "jobrunner_dev", (), 0, None),                # a redeploy
    ([], None, None, (), 0, None),                                      # a first deploy
])
def test_main_reads_the_keyspace_and_the_stack(
    argv: list[str], keyspace: str | None, stack_holds: str | None, tables: tuple[str, ...], status: int,
    says: str | None, capsys: pytest.CaptureFixture[str],
) -> None:
    lambda_client, lambdas = _lambda_client("eu-west-1")
    keyspaces, keyspaces_stub = _keyspaces_client(keyspace, tables)
    cloudformation, stacks = _cloudformation_client(stack_holds)
    with lambdas, keyspaces_stub, stacks:
        assert main([*argv, "-c", "alarm_email=dev@example.com"], lambda_client=lambda_client,
                    keyspaces_client=keyspaces, cloudformation_client=cloudformation) == status
        keyspaces_stub.assert_no_pending_responses()

    err = capsys.readouterr().err
    assert (says in err) if says else "error" not in err


def test_dev_admitting_its_whole_account_is_warned_about() -> None:
    # Given dev's default: no allow-list, so the deploying account's principals are all tenants
    (found,) = admission_problems(config(), "123456789012")

    assert not found.blocking
    assert "every principal of account 123456789012" in found.text and "api_principals" in found.text
    # And a list, or Cognito, says nothing
    assert admission_problems(config(api_principals=["arn:aws:iam::123456789012:role/ci"]), "123456789012") == []
    assert admission_problems(config(api_auth="cognito", tenant_topics={"*": ["jobs"]}), "123456789012") == []


CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"
ON_A_DOMAIN = {"dashboard_domain": {"domain_name": "jobs.example.com", "certificate_arn": CERTIFICATE}}


@pytest.mark.parametrize(("certificate", "message"), [
    ({"Status": "ISSUED", "DomainName": "jobs.example.com"}, None),
    ({"Status": "ISSUED", "DomainName": "example.com", "SubjectAlternativeNames": ["*.example.com"]}, None),
    ({"Status": "PENDING_VALIDATION", "DomainName": "jobs.example.com"}, "is PENDING_VALIDATION, not ISSUED"),
    ({"Status": "ISSUED", "DomainName": "*.jobs.example.com"}, "not jobs.example.com"),
    (None, "no such certificate in us-east-1"),
])
def test_a_domains_certificate_must_be_issued_for_that_name(certificate: dict[str, Any] | None,
                                                            message: str | None) -> None:
    found = certificate_problems(config(**ON_A_DOMAIN), {CERTIFICATE: certificate})

    if message is None:
        assert found == []
    else:
        (problem,) = found
        assert problem.blocking and message in problem.text


def test_main_reads_each_certificate_in_its_own_region(capsys: pytest.CaptureFixture[str]) -> None:
    lambda_client, lambdas = _lambda_client("eu-west-1")
    acm = boto3.client("acm", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    regions = []

    def acm_client_for(region: str) -> Any:
        regions.append(region)
        return acm

    dashboard = json.dumps(ON_A_DOMAIN["dashboard_domain"])
    with lambdas, Stubber(acm) as certificates:
        certificates.add_response("describe_certificate", {"Certificate": {
            "CertificateArn": CERTIFICATE, "Status": "PENDING_VALIDATION", "DomainName": "jobs.example.com"}},
            {"CertificateArn": CERTIFICATE})
        assert main(["-c", f"dashboard_domain={dashboard}"], lambda_client=lambda_client,
                    acm_client_for=acm_client_for) == 1

    assert regions == ["us-east-1"]
    assert "dashboard_domain.certificate_arn" in capsys.readouterr().err


def test_the_apis_certificate_must_be_in_the_stacks_region() -> None:
    certificate = CERTIFICATE.replace("us-east-1", "eu-west-1")
    api = {"api_domain": {"domain_name": "api.example.com", "certificate_arn": certificate}}
    issued = {certificate: {"Status": "ISSUED", "DomainName": "api.example.com"}}

    # Given an unpinned stage (the config cannot check the region), deployed to us-east-1
    (found,) = certificate_problems(config(**api), issued, "us-east-1")

    assert found.blocking and "in eu-west-1, but the stack deploys to us-east-1" in found.text
    assert certificate_problems(config(**api), issued, "eu-west-1") == []
