"""Amazon Keyspaces: the keyspace and one table per ``CREATE TABLE`` of ``cql/``
(see ``cql.schema``).

Tables are on-demand, or provisioned with auto scaling (``capacity``, sized by ``provisioned_capacity``), with
point-in-time recovery on the tables ``pitr_tables`` names (default: every table), encrypted with an AWS-owned
key (Keyspaces' default). Column names, types, key order and clustering order come from the parsed schema only.

An adopted keyspace (``adopt``: one an earlier stack left behind, its name being fixed) is neither created nor
are its tables: the stack only grants access to them by name, and ``python -m cql.migrate`` keeps them in step
with ``cql/`` (``make preflight`` checks that every table is there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_cassandra as cassandra
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from cql.schema import TableSpec


#: The longest default time to live Keyspaces accepts (20 years).
KEYSPACES_MAX_TTL_S = 630_720_000


def keyspaces_default_ttl(spec: TableSpec) -> int | None:
    """The table's default TTL from ``cql/``; for a table without one whose rows are written ``USING TTL``,
    the longest: CloudFormation turns TTL on only through a default, and Keyspaces refuses ``USING TTL``
    on a table without TTL. Every such insert sets its own TTL, so the default only ever applies to rows
    an older release wrote without one."""
    if spec.default_time_to_live is None and spec.rows_expire:
        return KEYSPACES_MAX_TTL_S
    return spec.default_time_to_live


@dataclass(frozen=True)
class TableCapacity:
    """A provisioned table's auto scaling range, in capacity units a second (reads, writes)."""

    read_min: int
    read_max: int
    write_min: int
    write_max: int


#: Auto scaling keeps each table's consumed capacity near this share of what is provisioned.
TARGET_UTILISATION = 70.0
#: Capacity units per execution by table (reads, writes), at the documented mix (half one-time, half recurring;
#: docs/scaling.md section 4): the history's RUNNING record and outcome and the results' read of it; each
#: execution's next run or a one-time job's first run and the scan's pages; the scan's and the results' job reads
#: and a one-time job's row; its change-log entry. Calendars and idempotency keys see a few calls per submit.
UNITS_PER_EXECUTION: dict[str, tuple[float, float]] = {
    "task_history_v2": (1.0, 2.0), "task_schedule_v2": (0.5, 1.0), "job_table_v2": (2.0, 0.5),
    "job_changes": (0.0, 0.5), "job_idempotency": (0.01, 0.01), "calendars": (0.01, 0.0),
}
#: A busy minute (all of it due at its first second, out within 15 s) over the mean rate: 86,400 / (1,440 x 15).
BUSY_OVER_MEAN = 4.0
#: Auto scaling's floor, as a share of the mean rate's capacity: a steady stage sits near the mean, and an idle
#: one pays a tenth of it (a load returning after a lull meets Keyspaces' burst capacity, then the scaling).
FLOOR_SHARE = 0.1


def provisioned_capacity(tables: Sequence[str], executions_per_day: int) -> dict[str, TableCapacity]:
    """Each table's range: from a tenth of its mean rate at the target utilisation up to a busy minute's rate."""
    mean = executions_per_day / 86_400
    out = {}
    for name in tables:
        reads, writes = UNITS_PER_EXECUTION.get(name, (0.01, 0.01))
        low_r, low_w = (max(1, math.ceil(FLOOR_SHARE * mean * u * 100 / TARGET_UTILISATION)) for u in (reads, writes))
        out[name] = TableCapacity(read_min=low_r, read_max=max(low_r, math.ceil(mean * reads * BUSY_OVER_MEAN)),
                                  write_min=low_w, write_max=max(low_w, math.ceil(mean * writes * BUSY_OVER_MEAN)))
    return out


def _auto_scaling(low: int, high: int) -> cassandra.CfnTable.AutoScalingSettingProperty:
    return cassandra.CfnTable.AutoScalingSettingProperty(
        auto_scaling_disabled=False, minimum_units=low, maximum_units=high,
        scaling_policy=cassandra.CfnTable.ScalingPolicyProperty(
            target_tracking_scaling_policy_configuration=cassandra.CfnTable.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=TARGET_UTILISATION)))


def _billing(capacity: TableCapacity | None) -> dict[str, object]:
    """The table's billing properties: on-demand, or provisioned at its floor with auto scaling above it."""
    if capacity is None:
        return {"billing_mode": cassandra.CfnTable.BillingModeProperty(mode="ON_DEMAND")}
    return {
        "billing_mode": cassandra.CfnTable.BillingModeProperty(
            mode="PROVISIONED", provisioned_throughput=cassandra.CfnTable.ProvisionedThroughputProperty(
                read_capacity_units=capacity.read_min, write_capacity_units=capacity.write_min)),
        "auto_scaling_specifications": cassandra.CfnTable.AutoScalingSpecificationProperty(
            read_capacity_auto_scaling=_auto_scaling(capacity.read_min, capacity.read_max),
            write_capacity_auto_scaling=_auto_scaling(capacity.write_min, capacity.write_max)),
    }


def _column(name: str, cql_type: str) -> cassandra.CfnTable.ColumnProperty:
    return cassandra.CfnTable.ColumnProperty(column_name=name, column_type=cql_type)


class KeyspacesSchema(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        keyspace_name: str,
        tables: Sequence[TableSpec],
        removal_policy: RemovalPolicy,
        adopt: bool = False,
        pitr_tables: Collection[str] | None = None,
        capacity: Mapping[str, TableCapacity] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        names = {spec.name for spec in tables}
        unknown = sorted((set(pitr_tables or ()) | set(capacity or {})) - names)
        if unknown:
            raise ValueError(f"no such table in cql/: {unknown}")
        #: None: every table.
        self.pitr_tables = frozenset(names if pitr_tables is None else pitr_tables)
        self.capacity = dict(capacity or {})
        self.keyspace_name = keyspace_name
        #: The tables the grants name: the schema's, created here or adopted.
        self.table_names = tuple(spec.name for spec in tables)
        self.keyspace: cassandra.CfnKeyspace | None = None  # None: adopted
        self.tables: dict[str, cassandra.CfnTable] = {}
        if not adopt:
            self._create(tables, removal_policy)

    def _create(self, tables: Sequence[TableSpec], removal_policy: RemovalPolicy) -> None:
        keyspace_name = self.keyspace_name
        keyspace = self.keyspace = cassandra.CfnKeyspace(
            self, "Keyspace", keyspace_name=keyspace_name,
            replication_specification=cassandra.CfnKeyspace.ReplicationSpecificationProperty(
                replication_strategy="SINGLE_REGION",
            ),
        )
        keyspace.apply_removal_policy(removal_policy)
        for spec in tables:
            table = cassandra.CfnTable(
                self, f"Table-{spec.name}",
                keyspace_name=keyspace_name,
                table_name=spec.name,
                partition_key_columns=[_column(c.name, c.type) for c in spec.partition_key],
                clustering_key_columns=[
                    cassandra.CfnTable.ClusteringKeyColumnProperty(column=_column(c.name, c.type), order_by=order)
                    for c, order in spec.clustering
                ] or None,
                regular_columns=[_column(c.name, c.type) for c in spec.regular] or None,
                point_in_time_recovery_enabled=spec.name in self.pitr_tables,
                **_billing(self.capacity.get(spec.name)),  # type: ignore[arg-type]
                default_time_to_live=keyspaces_default_ttl(spec),
                # Client-side timestamps are left to `python -m cql.migrate` (ALTER TABLE, in place): the property
                # is create-only here, and a deployed table would be replaced, an update CloudFormation refuses for
                # a named table.
            )
            table.node.add_dependency(keyspace)
            table.apply_removal_policy(removal_policy)
            self.tables[spec.name] = table

    @property
    def _arn_prefix(self) -> str:
        return f"arn:{Aws.PARTITION}:cassandra:{Aws.REGION}:{Aws.ACCOUNT_ID}:"

    def table_arn(self, table: str) -> str:
        return f"{self._arn_prefix}/keyspace/{self.keyspace_name}/table/{table}"

    @property
    def system_keyspaces_arn(self) -> str:
        return f"{self._arn_prefix}/keyspace/system*"

    def grant_read_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """``cassandra:Select``/``Modify`` on this keyspace's tables; ``Select`` on the system keyspaces,
        which the driver reads when it connects (peers, schema); and the two ec2 reads Keyspaces makes
        as the caller to list the VPC endpoint's addresses in ``system.peers`` (without them the driver
        sees a single peer and opens fewer connections)."""
        tables = iam.Grant.add_to_principal(
            grantee=grantee, actions=["cassandra:Select", "cassandra:Modify"],
            resource_arns=[self.table_arn(name) for name in self.table_names],
        )
        self._grant_connect(grantee)
        return tables

    def grant_tables(self, grantee: iam.IGrantable, *, read: Sequence[str], write: Sequence[str]) -> None:
        """``cassandra:Select`` on the tables ``read`` names and ``cassandra:Modify`` on those ``write`` names (a
        function that touches only some tables, in only some ways), and what connecting takes (``grant_read_write``)."""
        unknown = sorted((set(read) | set(write)) - set(self.table_names))
        if unknown:
            raise ValueError(f"no such table in cql/: {unknown}")
        iam.Grant.add_to_principal(grantee=grantee, actions=["cassandra:Select"],
                                   resource_arns=[self.table_arn(name) for name in read])
        iam.Grant.add_to_principal(grantee=grantee, actions=["cassandra:Modify"],
                                   resource_arns=[self.table_arn(name) for name in write])
        self._grant_connect(grantee)

    def _grant_connect(self, grantee: iam.IGrantable) -> None:
        iam.Grant.add_to_principal(grantee=grantee, actions=["cassandra:Select"],
                                   resource_arns=[self.system_keyspaces_arn])
        iam.Grant.add_to_principal(grantee=grantee, resource_arns=["*"],
                                   actions=["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcEndpoints"])
        if isinstance(grantee, Construct):
            acknowledge(grantee, {
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cassandra:<AWS::Region>:<AWS::AccountId>:"
                "/keyspace/system*]": "The driver reads the system keyspaces (system, system_schema, "
                                      "system_schema_mcs...) when it connects; read-only.",
                "AwsSolutions-IAM5[Resource::*]": "ec2:DescribeNetworkInterfaces and ec2:DescribeVpcEndpoints take "
                                                  "no resource ARN; Keyspaces calls them to fill system.peers.",
            })
