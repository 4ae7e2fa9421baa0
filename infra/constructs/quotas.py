"""The quota table (DynamoDB): each tenant's submissions counted per second, against its rate limit.

Key ``tenant`` (S) / ``window`` (N), as ``jobrunner.adapters.quotas.dynamodb`` writes it; on-demand, TTL
on ``expires_at`` (a window's item is kept an hour). Counters are worth nothing after their second, so
the table is destroyed with the stack and has no point-in-time recovery.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.constructs.nag import acknowledge

#: What an admission is: one conditional UpdateItem that adds to the window's counter, nothing else.
ADMIT_ACTIONS = ("dynamodb:UpdateItem",)
ADMIT_ATTRIBUTES = ("tenant", "window", "admitted", "expires_at")


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
            "AwsSolutions-DDB3": "Counters of the current second's submissions: nothing to recover, a restored "
                                 "table would only hold expired windows.",
        })

    @property
    def table_name(self) -> str:
        return self.table.table_name

    def grant_admit(self, grantee: iam.IGrantable) -> None:
        """Count admissions (the API): updates of the counter's own attributes only."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=list(ADMIT_ACTIONS), resource_arns=[self.table.table_arn],
            conditions={"ForAllValues:StringEquals": {"dynamodb:Attributes": list(ADMIT_ATTRIBUTES)}},
        )
