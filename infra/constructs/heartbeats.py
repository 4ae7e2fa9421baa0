"""The heartbeat table (DynamoDB): per-segment summaries, per-(minute, segment) leases and watermarks.

Key ``segment`` (N) / ``minute`` (N), as ``jobrunner.adapters.leases.dynamodb`` reads and writes
it; on-demand, point-in-time recovery, TTL on ``expires_at`` (partition items are kept three days).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from jobrunner.ports import RECONCILER_SEGMENT

#: What the lease store calls: conditional UpdateItem for leases and watermarks, BatchGetItem
#: (and GetItem) to read them.
LEASE_ACTIONS = ("dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:BatchGetItem")
READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem")
#: Recording the segment count a writer uses: read and raise the table's own item, and no other.
#: Starting segments before a writer uses them (``jobrunner.services.segments.start_segments``): read the
#: segments' summaries, set a new segment's watermark, raise the recorded count; no other attribute.
SEGMENT_START_READS = ("dynamodb:GetItem", "dynamodb:BatchGetItem")
SEGMENT_START_WRITES = ("dynamodb:UpdateItem",)
SEGMENT_START_ATTRIBUTES = ("segment", "minute", "watermark", "highest_segment_count")


class HeartbeatTable(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: RemovalPolicy,
                 deletion_protection: bool = False) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self, "Table",
            partition_key=dynamodb.Attribute(name="segment", type=dynamodb.AttributeType.NUMBER),
            sort_key=dynamodb.Attribute(name="minute", type=dynamodb.AttributeType.NUMBER),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True,
            ),
            time_to_live_attribute="expires_at",
            removal_policy=removal_policy,
            # DeletionProtectionEnabled: DeleteTable fails, whoever calls it, until it is turned off.
            deletion_protection=deletion_protection,
        )

    @property
    def table_name(self) -> str:
        return self.table.table_name

    def grant_leases(self, grantee: iam.IGrantable) -> iam.Grant:
        """Take, renew and finish leases, advance watermarks (scan, tick)."""
        return self.table.grant(grantee, *LEASE_ACTIONS)

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read segment health (the API's ``GET /segments``)."""
        return self.table.grant(grantee, *READ_ACTIONS)

    def grant_segment_start(self, grantee: iam.IGrantable) -> None:
        """Start the segments a writer places rows in and record its count (API, results): updates may touch
        only the watermark and the recorded count, never a lease, a counter or a parked set."""
        iam.Grant.add_to_principal(grantee=grantee, actions=list(SEGMENT_START_READS),
                                   resource_arns=[self.table.table_arn])
        iam.Grant.add_to_principal(
            grantee=grantee, actions=list(SEGMENT_START_WRITES), resource_arns=[self.table.table_arn],
            conditions={
                "ForAllValues:StringEquals": {"dynamodb:Attributes": list(SEGMENT_START_ATTRIBUTES)},
                "StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE"]},
            },
        )

    def grant_reconciler(self, grantee: iam.IGrantable) -> None:
        """The reconciler's items (``RECONCILER_SEGMENT``: its state and its lease): update those only, by their
        partition key; reading the segments is ``grant_read``."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["dynamodb:UpdateItem"], resource_arns=[self.table.table_arn],
            conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [str(RECONCILER_SEGMENT)]}},
        )
