from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template

from cql.schema import load_tables, parse_table
from infra.constructs.storage import KeyspacesSchema

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    import aws_cdk as cdk

SCHEMA = [
    parse_table("CREATE TABLE a (k text, c timestamp, v int, PRIMARY KEY ((k), c)) WITH CLUSTERING ORDER BY (c DESC)"),
    parse_table("CREATE TABLE b (k1 int, k2 int, v text, PRIMARY KEY ((k1, k2)))"),
]


def test_keyspace_and_tables_follow_the_schema(stack: cdk.Stack) -> None:
    KeyspacesSchema(stack, "Ks", keyspace_name="jr_test", tables=SCHEMA, removal_policy=RemovalPolicy.RETAIN)
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::Cassandra::Keyspace", {
        "KeyspaceName": "jr_test", "ReplicationSpecification": {"ReplicationStrategy": "SINGLE_REGION"},
    })
    template.has_resource("AWS::Cassandra::Table", {
        "Properties": {
            "KeyspaceName": "jr_test", "TableName": "a",
            "PartitionKeyColumns": [{"ColumnName": "k", "ColumnType": "text"}],
            "ClusteringKeyColumns": [{"Column": {"ColumnName": "c", "ColumnType": "timestamp"}, "OrderBy": "DESC"}],
            "RegularColumns": [{"ColumnName": "v", "ColumnType": "int"}],
            "BillingMode": {"Mode": "ON_DEMAND"}, "PointInTimeRecoveryEnabled": True,
        },
        "DeletionPolicy": "Retain",
        "DependsOn": Match.array_with([Match.string_like_regexp("KsKeyspace")]),
    })
    template.has_resource_properties("AWS::Cassandra::Table", {
        "TableName": "b", "ClusteringKeyColumns": Match.absent(),
        "PartitionKeyColumns": [{"ColumnName": "k1", "ColumnType": "int"}, {"ColumnName": "k2", "ColumnType": "int"}],
    })


def test_grant_names_the_tables_and_reads_the_system_keyspaces(stack: cdk.Stack) -> None:
    schema = KeyspacesSchema(stack, "Ks", keyspace_name="jr_test", tables=SCHEMA, removal_policy=RemovalPolicy.DESTROY)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    schema.grant_read_write(role)
    statements = next(iter(Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()))[
        "Properties"]["PolicyDocument"]["Statement"]

    assert statements[0]["Action"] == ["cassandra:Select", "cassandra:Modify"]
    assert [stack.resolve(r)["Fn::Join"][1][-1] for r in statements[0]["Resource"]] == [
        ":/keyspace/jr_test/table/a", ":/keyspace/jr_test/table/b",
    ]
    assert statements[1]["Action"] == "cassandra:Select"
    assert statements[1]["Resource"]["Fn::Join"][1][-1] == ":/keyspace/system*"
    assert statements[2]["Action"] == ["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcEndpoints"]


def test_the_history_and_the_idempotency_keys_expire_on_keyspaces_as_the_schema_says(stack: cdk.Stack) -> None:
    # The project's own schema: history kept 30 days, idempotency keys 24 hours (cql/001_tables.cql)
    KeyspacesSchema(stack, "Ks", keyspace_name="jr_test", tables=load_tables(), removal_policy=RemovalPolicy.RETAIN)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Cassandra::Table", {"TableName": "task_history_v2",
                                                               "DefaultTimeToLive": 30 * 24 * 3600})
    template.has_resource_properties("AWS::Cassandra::Table", {"TableName": "job_idempotency",
                                                               "DefaultTimeToLive": 24 * 3600})
    template.has_resource_properties("AWS::Cassandra::Table", {"TableName": "job_table_v2",
                                                               "DefaultTimeToLive": Match.absent()})


def test_tables_leave_client_side_timestamps_to_the_migration(stack: cdk.Stack) -> None:
    # ClientSideTimestampsEnabled is a create-only property of AWS::Cassandra::Table (its CloudFormation schema):
    # setting it on a deployed table means replacing that named table, an update CloudFormation refuses (and a new
    # table would be empty). `python -m cql.migrate` turns them on in place (ALTER TABLE; tests/cql/test_migrate.py).
    KeyspacesSchema(stack, "Ks", keyspace_name="jr_test", tables=SCHEMA, removal_policy=RemovalPolicy.RETAIN)

    tables = Template.from_stack(stack).find_resources("AWS::Cassandra::Table")

    assert tables
    assert all("ClientSideTimestampsEnabled" not in table["Properties"] for table in tables.values())


def test_an_adopted_keyspace_is_neither_created_nor_its_tables_but_still_granted(stack: cdk.Stack) -> None:
    # Given a keyspace left by an earlier stack (retain_data), adopted rather than created again
    schema = KeyspacesSchema(stack, "Ks", keyspace_name="jr_test", tables=SCHEMA, removal_policy=RemovalPolicy.RETAIN,
                             adopt=True)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    schema.grant_read_write(role)
    template = Template.from_stack(stack)

    assert not template.find_resources("AWS::Cassandra::Keyspace")
    assert not template.find_resources("AWS::Cassandra::Table")
    statements = next(iter(template.find_resources("AWS::IAM::Policy").values()))[
        "Properties"]["PolicyDocument"]["Statement"]
    assert [stack.resolve(r)["Fn::Join"][1][-1] for r in statements[0]["Resource"]] == [
        ":/keyspace/jr_test/table/a", ":/keyspace/jr_test/table/b",
    ]


def test_a_stage_adopting_its_keyspace_deploys_everything_else(stack_template: Callable[..., dict[str, Any]]) -> None:
    template = stack_template(adopt_keyspace=True)

    types = {r["Type"] for r in template["Resources"].values()}
    assert not {t for t in types if t.startswith("AWS::Cassandra::")}
    # And the functions still use it, by its name
    (scan,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
               and r["Properties"].get("FunctionName") == "jobrunner-dev-scan"]
    assert scan["Properties"]["Environment"]["Variables"]["CASSANDRA_KEYSPACE"] == "jobrunner_dev"
    assert template["Outputs"]["KeyspaceName"]["Value"] == "jobrunner_dev"


def test_point_in_time_recovery_only_on_the_tables_named(stack: cdk.Stack) -> None:
    KeyspacesSchema(stack, "Ks", keyspace_name="jr", tables=SCHEMA, removal_policy=RemovalPolicy.RETAIN,
                    pitr_tables=["a"])
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::Cassandra::Table", {"TableName": "a", "PointInTimeRecoveryEnabled": True})
    template.has_resource_properties("AWS::Cassandra::Table", {"TableName": "b", "PointInTimeRecoveryEnabled": False})


def test_provisioned_tables_scale_between_the_mean_rate_and_a_busy_minute(stack: cdk.Stack) -> None:
    from infra.constructs.storage import TableCapacity, provisioned_capacity

    # Given 50 M executions a day: ≈ 579 a second, two history writes each
    history = provisioned_capacity(["task_history_v2"], 50_000_000)["task_history_v2"]
    assert history == TableCapacity(read_min=83, read_max=2315, write_min=166, write_max=4630)
    # When a table is provisioned with it
    KeyspacesSchema(stack, "Ks", keyspace_name="jr", tables=SCHEMA, removal_policy=RemovalPolicy.RETAIN,
                    capacity={"a": history})
    template = Template.from_stack(stack)
    # Then it starts at a tenth of the mean rate and auto scales (70 % utilisation) up to the busy minute; the other
    # table stays on-demand
    scaling = {"AutoScalingDisabled": False, "ScalingPolicy": {
        "TargetTrackingScalingPolicyConfiguration": {"TargetValue": 70}}}
    template.has_resource_properties("AWS::Cassandra::Table", {
        "TableName": "a",
        "BillingMode": {"Mode": "PROVISIONED",
                        "ProvisionedThroughput": {"ReadCapacityUnits": 83, "WriteCapacityUnits": 166}},
        "AutoScalingSpecifications": {
            "ReadCapacityAutoScaling": {**scaling, "MinimumUnits": 83, "MaximumUnits": 2315},
            "WriteCapacityAutoScaling": {**scaling, "MinimumUnits": 166, "MaximumUnits": 4630}},
    })
    template.has_resource_properties("AWS::Cassandra::Table", {"TableName": "b", "BillingMode": {"Mode": "ON_DEMAND"},
                                                               "AutoScalingSpecifications": Match.absent()})


def test_a_table_not_in_the_schema_is_refused(stack: cdk.Stack) -> None:
    import pytest

    with pytest.raises(ValueError, match="no such table"):
        KeyspacesSchema(stack, "Ks", keyspace_name="jr", tables=SCHEMA, removal_policy=RemovalPolicy.RETAIN,
                        pitr_tables=["c"])
