"""The quota table (DynamoDB): each tenant's submissions counted per second, its recurring jobs held and
its executions due per minute, against its limits.

Key ``tenant`` (S) / ``window`` (N), as ``jobrunner.adapters.quotas.dynamodb`` writes it; on-demand, TTL
on ``expires_at`` (a second's or a minute's item is kept an hour after it). The table is destroyed with
the stack and has no point-in-time recovery: a rate counter is worth nothing after its second, and
standing counts lost with the table start again from zero, which can only admit more, never lose a job.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.constructs.nag import acknowledge

#: What counting is: conditional updates of a tenant's counters (alone or in a transaction) and consistent
#: reads of them, nothing else.
ADMIT_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem")
ADMIT_ATTRIBUTES = ("tenant", "window", "admitted", "expires_at", "jobs", "per_minute", "peak", "until", "rev",
                    "fires", "counted")
#: What giving back is (``jobrunner.services.retire``: a job deleted after its last fire gives back what it held):
#: a take that only gives back, so a consistent read and a conditional update of the standing counts, and a
#: minute's one-time fire given back; never a rate window (``admitted``) or a create's marker (``counted``).
GIVE_BACK_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem")
GIVE_BACK_ATTRIBUTES = ("tenant", "window", "jobs", "per_minute", "peak", "until", "rev", "fires")


class QuotaTable(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self, "Table",
            partition_key=dynamodb.Attribute(name="tenant", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="window", type=dynamodb.AttributeType.NUMBER),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expires_at",
            removal_policy=RemovalPolicy.DESTROY,
        )
        acknowledge(self.table, {
            "AwsSolutions-DDB3": "Counters of tenants' submissions and holdings: a lost count restarts from zero, "
                                 "which only admits more; nothing a job needs is kept here.",
        })

    @property
    def table_name(self) -> str:
        return self.table.table_name

    def grant_admit(self, grantee: iam.IGrantable) -> None:
        """Count admissions (the API): reads and updates of the counters' own attributes only."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=list(ADMIT_ACTIONS), resource_arns=[self.table.table_arn],
            conditions={"ForAllValues:StringEquals": {"dynamodb:Attributes": list(ADMIT_ATTRIBUTES)}},
        )

    def grant_give_back(self, grantee: iam.IGrantable) -> None:
        """Give counts back (the scan and results functions, which delete a job after its last fire): the standing
        counts and a minute's fires only, and no update that returns the item."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=list(GIVE_BACK_ACTIONS), resource_arns=[self.table.table_arn],
            conditions={"ForAllValues:StringEquals": {"dynamodb:Attributes": list(GIVE_BACK_ATTRIBUTES)},
                        "StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE"]}},
        )
