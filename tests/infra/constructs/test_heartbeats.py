from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from infra.constructs.heartbeats import (
    LEASE_ACTIONS,
    READ_ACTIONS,
    SEGMENT_START_ATTRIBUTES,
    SEGMENT_START_READS,
    HeartbeatTable,
)

if TYPE_CHECKING:
    import aws_cdk as cdk


def test_table_keys_billing_recovery_and_ttl(stack: cdk.Stack) -> None:
    HeartbeatTable(stack, "Hb", removal_policy=RemovalPolicy.RETAIN)

    Template.from_stack(stack).has_resource("AWS::DynamoDB::Table", {
        "Properties": {
            "KeySchema": [{"AttributeName": "segment", "KeyType": "HASH"},
                          {"AttributeName": "minute", "KeyType": "RANGE"}],
            "AttributeDefinitions": [{"AttributeName": "segment", "AttributeType": "N"},
                                     {"AttributeName": "minute", "AttributeType": "N"}],
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        },
        "DeletionPolicy": "Retain",
    })


def test_deletion_protection_only_when_asked(stack: cdk.Stack) -> None:
    HeartbeatTable(stack, "Protected", removal_policy=RemovalPolicy.RETAIN, deletion_protection=True)
    HeartbeatTable(stack, "Plain", removal_policy=RemovalPolicy.RETAIN)

    tables = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table")
    assert {lid[:5]: t["Properties"].get("DeletionProtectionEnabled") for lid, t in tables.items()} == {
        "Prote": True, "Plain": False}


def test_grants_are_the_calls_the_heartbeat_store_makes(stack: cdk.Stack) -> None:
    table = HeartbeatTable(stack, "Hb", removal_policy=RemovalPolicy.DESTROY)
    writer = iam.Role(stack, "Writer", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    reader = iam.Role(stack, "Reader", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    table.grant_leases(writer)
    table.grant_read(reader)
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")

    actions = {p["Properties"]["Roles"][0]["Ref"][:6]: p["Properties"]["PolicyDocument"]["Statement"][0]["Action"]
               for p in policies.values()}
    assert actions == {"Writer": list(LEASE_ACTIONS), "Reader": list(READ_ACTIONS)}
    assert "dynamodb:PutItem" not in LEASE_ACTIONS and "dynamodb:DeleteItem" not in LEASE_ACTIONS


def test_the_segment_start_grant_updates_watermarks_and_the_count_only(stack: cdk.Stack) -> None:
    table = HeartbeatTable(stack, "Hb", removal_policy=RemovalPolicy.DESTROY)
    api = iam.Role(stack, "Api", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    table.grant_segment_start(api)
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()

    reads, writes = policy["Properties"]["PolicyDocument"]["Statement"]
    assert reads["Action"] == list(SEGMENT_START_READS) and "Condition" not in reads
    assert writes["Action"] == "dynamodb:UpdateItem"
    assert writes["Condition"]["ForAllValues:StringEquals"] == {"dynamodb:Attributes": list(SEGMENT_START_ATTRIBUTES)}
    # the attributes the lease store writes when it starts a segment and records a count
    assert {"watermark", "highest_segment_count"} <= set(SEGMENT_START_ATTRIBUTES)
    assert not {"owner", "lease_expires", "done", "parked", "published_total"} & set(SEGMENT_START_ATTRIBUTES)
