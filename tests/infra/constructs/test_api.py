from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from aws_cdk.assertions import Match, Template

from infra.constructs.api import Api

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk

    from infra.constructs.function import FunctionBase


def _api(stack: cdk.Stack, base: FunctionBase, code: Path, auth: str) -> Template:
    Api(stack, "Api", base=base, code=code, auth=auth, stage_name="test", rate_limit=20, burst_limit=40)
    return Template.from_stack(stack)


def _method(template: Template, http_method: str) -> dict[str, object]:
    (method,) = template.find_resources("AWS::ApiGateway::Method", {"Properties": {"HttpMethod": http_method}}).values()
    return method["Properties"]  # type: ignore[no-any-return]


def test_iam_authorizes_everything_but_health(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    template = _api(stack, base, code, "iam")

    assert _method(template, "ANY")["AuthorizationType"] == "AWS_IAM"
    assert _method(template, "GET")["AuthorizationType"] == "NONE"
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "{proxy+}"})
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "health"})
    template.resource_count_is("AWS::Cognito::UserPool", 0)


def test_stage_throttles_logs_and_traces(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    template = _api(stack, base, code, "iam")

    template.has_resource_properties("AWS::ApiGateway::Stage", {
        "StageName": "test", "TracingEnabled": True,
        "AccessLogSetting": {"DestinationArn": Match.any_value(), "Format": Match.string_like_regexp("requestId")},
        "MethodSettings": [Match.object_like({"ThrottlingRateLimit": 20, "ThrottlingBurstLimit": 40,
                                              "LoggingLevel": "ERROR", "DataTraceEnabled": False})],
    })
    template.has_resource_properties("AWS::ApiGateway::RequestValidator", {
        "ValidateRequestBody": True, "ValidateRequestParameters": True,
    })


def test_proxy_integration_to_the_api_function_in_the_vpc(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    template = _api(stack, base, code, "iam")

    assert _method(template, "ANY")["Integration"]["Type"] == "AWS_PROXY"  # type: ignore[index]
    template.has_resource_properties("AWS::Lambda::Function", {
        "Description": "HTTP API", "Timeout": 29, "VpcConfig": Match.any_value(),
    })


def test_cognito_user_pool_authorizer(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    template = _api(stack, base, code, "cognito")

    assert _method(template, "ANY")["AuthorizationType"] == "COGNITO_USER_POOLS"
    assert _method(template, "GET")["AuthorizationType"] == "NONE"
    template.has_resource_properties("AWS::Cognito::UserPool", {
        "AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True},
        "Policies": {"PasswordPolicy": Match.object_like({"MinimumLength": 12, "RequireSymbols": True})},
    })
    template.has_resource_properties("AWS::ApiGateway::Authorizer", {"Type": "COGNITO_USER_POOLS"})
    template.has_resource_properties("AWS::Cognito::UserPoolClient", {"GenerateSecret": False})


def test_unknown_auth_is_refused(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    with pytest.raises(ValueError, match="iam or cognito"):
        _api(stack, base, code, "apikey")
