from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aws_cdk.assertions import Template

from infra.constructs.edge import WebAcl

if TYPE_CHECKING:
    from collections.abc import Callable

    import aws_cdk as cdk

STAGE_ARN = "arn:aws:apigateway:eu-west-1::/restapis/abc123/stages/prod"


def test_the_web_acl_blocks_a_source_ip_above_its_rate_and_allows_the_rest(stack: cdk.Stack) -> None:
    WebAcl(stack, "Edge", name="jobrunner-prod-api", rate_limit=7500, resource_arn=STAGE_ARN)
    template = Template.from_stack(stack)

    (acl,) = template.find_resources("AWS::WAFv2::WebACL").values()
    props = acl["Properties"]
    assert (props["Scope"], props["DefaultAction"]) == ("REGIONAL", {"Allow": {}})
    (rule,) = props["Rules"]
    assert rule["Action"] == {"Block": {}}
    assert rule["Statement"] == {"RateBasedStatement": {"AggregateKeyType": "IP", "Limit": 7500,
                                                        "EvaluationWindowSec": 300}}
    assert rule["VisibilityConfig"]["CloudWatchMetricsEnabled"] is True
    template.has_resource_properties("AWS::WAFv2::WebACLAssociation", {
        "ResourceArn": STAGE_ARN, "WebACLArn": {"Fn::GetAtt": [next(iter(template.find_resources(
            "AWS::WAFv2::WebACL"))), "Arn"]}})


def _associated_stage(template: dict[str, Any]) -> str:
    (association,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::WAFv2::WebACLAssociation"]
    return json.dumps(association["Properties"]["ResourceArn"])


def test_a_protected_stage_gets_a_web_acl_on_its_api_stage_and_dev_none(
    stack_template: Callable[..., dict[str, Any]],
) -> None:
    prod = stack_template(stage="prod", alarm_email="oncall@example.com", stages={"prod": {
        "account": "123456789012", "region": "eu-west-1", "protected": True,
        "api_principals": ["arn:aws:iam::123456789012:role/ci"]}})
    dev = stack_template()

    # prod ("auto"): on, at half the stage's throttle over 5 minutes, on the API's stage
    (acl,) = [r for r in prod["Resources"].values() if r["Type"] == "AWS::WAFv2::WebACL"]
    assert acl["Properties"]["Rules"][0]["Statement"]["RateBasedStatement"]["Limit"] == 50 * 300 // 2
    assert "/stages/" in _associated_stage(prod) and "ApiRestApiDeploymentStageprod" in _associated_stage(prod)
    assert "WebAclArn" in prod["Outputs"]
    # dev ("auto"): none; a number turns it on
    assert not [r for r in dev["Resources"].values() if r["Type"].startswith("AWS::WAFv2::")]
    assert "ApiRestApiDeploymentStagedev" in _associated_stage(stack_template(waf_rate_limit=2000))
