"""Edge protection of the API: a WAF web ACL (regional) on its stage, with one rate-based rule per source IP.

The stage's throttle is one bucket that every tenant shares (``infra/constructs/api.py``), and the app keeps each
tenant to its own rates (``tenant_limits``); neither stops one source from taking the whole bucket before it is
even authenticated. The rule counts each source IP's requests over a sliding 5 minutes and blocks it above
``rate_limit`` until its rate falls back under, answering 403 before the request reaches API Gateway's throttle or
the function. Everything else is allowed: the API authenticates every route but its public ``GET``s.

Requests that come through the dashboard's CloudFront distribution reach the stage from CloudFront's addresses, so
there the rule counts per edge address rather than per viewer (several viewers share one); a web ACL on the
distribution itself would be a CloudFront-scoped one, which must live in us-east-1 (docs/deploy.md).
"""

from __future__ import annotations

from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

#: The window WAF counts a rate-based rule's requests over, in seconds.
WINDOW_SECONDS = 300
METRIC_PREFIX = "jobrunner"


class WebAcl(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, name: str, rate_limit: int, resource_arn: str) -> None:
        """``rate_limit``: requests per source IP in any ``WINDOW_SECONDS``; ``resource_arn``: the API stage's."""
        super().__init__(scope, construct_id)
        self.acl = wafv2.CfnWebACL(
            self, "Acl",
            name=name,
            description="Job runner API: blocks a source IP above its rate",
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            rules=[wafv2.CfnWebACL.RuleProperty(
                name="RatePerSourceIp",
                priority=0,
                action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                statement=wafv2.CfnWebACL.StatementProperty(
                    rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                        aggregate_key_type="IP", limit=rate_limit, evaluation_window_sec=WINDOW_SECONDS,
                    ),
                ),
                visibility_config=_visibility(f"{name}-rate-per-ip"),
            )],
            visibility_config=_visibility(name),
        )
        self.association = wafv2.CfnWebACLAssociation(
            self, "Association", resource_arn=resource_arn, web_acl_arn=self.acl.attr_arn,
        )

    @property
    def arn(self) -> str:
        return self.acl.attr_arn


def _visibility(metric_name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    """CloudWatch metrics (AWS/WAFV2, free) and sampled requests, so that a block can be seen and explained."""
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=metric_name, sampled_requests_enabled=True,
    )
