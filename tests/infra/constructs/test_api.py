from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk.assertions import Match, Template

from infra.constructs.api import Api
from jobrunner.api.app import PUBLIC_PATHS

if TYPE_CHECKING:
    from pathlib import Path

    import aws_cdk as cdk

    from infra.constructs.function import FunctionBase


def _api(stack: cdk.Stack, base: FunctionBase, code: Path, auth: str) -> Template:
    Api(stack, "Api", base=base, code=code, auth=auth, stage_name="test", rate_limit=20, burst_limit=40)
    return Template.from_stack(stack)


PUBLIC = {"/health", "/openapi.json"}


def _method(template: Template, http_method: str) -> dict[str, object]:
    (method,) = template.find_resources("AWS::ApiGateway::Method", {"Properties": {"HttpMethod": http_method}}).values()
    return method["Properties"]  # type: ignore[no-any-return]


def _methods_by_path(template: Template) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(HTTP method, full resource path): method properties}``, the path rebuilt from the resource tree."""
    resources = template.find_resources("AWS::ApiGateway::Resource")

    def path_of(ref: Any) -> str:
        if not isinstance(ref, dict) or "Ref" not in ref:  # {"Fn::GetAtt": [RestApi, RootResourceId]}
            return ""
        props = resources[ref["Ref"]]["Properties"]
        return f"{path_of(props['ParentId'])}/{props['PathPart']}"

    return {(props["HttpMethod"], path_of(props["ResourceId"]) or "/"): props
            for props in (m["Properties"] for m in template.find_resources("AWS::ApiGateway::Method").values())}


def _request(methods: dict[tuple[str, str], dict[str, Any]], http_method: str, path: str) -> dict[str, Any]:
    """The method API Gateway picks for ``http_method path``: an exact resource, else ``ANY /{proxy+}``."""
    return methods.get((http_method, path)) or methods[("ANY", "/{proxy+}")]


@pytest.mark.parametrize(("auth", "expected"), [("iam", "AWS_IAM"), ("cognito", "COGNITO_USER_POOLS")])
def test_only_get_on_the_public_paths_is_unauthenticated(
    stack: cdk.Stack, base: FunctionBase, code: Path, auth: str, expected: str,
) -> None:
    methods = _methods_by_path(_api(stack, base, code, auth))

    # /health and /openapi.json (the very set the api function answers without a token): a browser fetches
    # them unsigned, so each has a GET method without authorization
    unauthenticated = {path for (verb, path), props in methods.items() if props["AuthorizationType"] == "NONE"}
    assert unauthenticated == PUBLIC == PUBLIC_PATHS
    # The dashboard's files are not the API's (CloudFront serves them from S3): /ui is authorized like any route
    assert not [path for (verb, path) in methods if path.startswith("/ui")]
    assert all(verb == "GET" for (verb, path), props in methods.items() if props["AuthorizationType"] == "NONE")
    for path in PUBLIC - {"/health"}:  # /health: API Gateway answers it (below)
        assert methods[("GET", path)]["Integration"]["Type"] == "AWS_PROXY"
    # Every /jobs route, and every other method, still goes through the authorizer
    for verb, path in [("GET", "/jobs"), ("POST", "/jobs"), ("GET", "/jobs/abc"), ("PATCH", "/jobs/abc"),
                       ("DELETE", "/jobs/abc"), ("POST", "/jobs/abc/run"), ("GET", "/jobs/abc/executions"),
                       ("GET", "/segments"), ("GET", "/ui"), ("GET", "/ui/app.js")]:
        assert _request(methods, verb, path)["AuthorizationType"] == expected, (verb, path)
    assert methods[("ANY", "/{proxy+}")]["AuthorizationType"] == expected
    assert not [key for key in methods if key[1].startswith("/jobs")]  # no public resource shadows /jobs


def test_iam_authorizes_everything_but_the_public_paths(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    template = _api(stack, base, code, "iam")

    assert _method(template, "ANY")["AuthorizationType"] == "AWS_IAM"
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "{proxy+}"})
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "health"})
    template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "openapi.json"})
    template.resource_count_is("AWS::ApiGateway::Method", len(PUBLIC) + 1)
    template.resource_count_is("AWS::Cognito::UserPool", 0)


def test_stage_throttles_logs_and_traces(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    template = _api(stack, base, code, "iam")

    template.has_resource_properties("AWS::ApiGateway::Stage", {
        "StageName": "test", "TracingEnabled": True,
        "AccessLogSetting": {"DestinationArn": Match.any_value(), "Format": Match.string_like_regexp("requestId")},
        "MethodSettings": Match.array_with([Match.object_like({
            "HttpMethod": "*", "ResourcePath": "/*", "ThrottlingRateLimit": 20, "ThrottlingBurstLimit": 40,
            "LoggingLevel": "ERROR", "DataTraceEnabled": False})]),
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
    template.has_resource_properties("AWS::Cognito::UserPool", {
        "AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True},
        "Policies": {"PasswordPolicy": Match.object_like({"MinimumLength": 12, "RequireSymbols": True})},
    })
    template.has_resource_properties("AWS::ApiGateway::Authorizer", {"Type": "COGNITO_USER_POOLS"})
    template.has_resource_properties("AWS::Cognito::UserPoolClient", {"GenerateSecret": False})


def test_unknown_auth_is_refused(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    with pytest.raises(ValueError, match="iam or cognito"):
        _api(stack, base, code, "apikey")


def test_health_is_answered_by_the_gateway_not_the_function(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    methods = _methods_by_path(_api(stack, base, code, "iam"))

    # Given an anonymous probe of GET /health: API Gateway answers it (a mock), no invocation, no cold start
    health = methods[("GET", "/health")]
    assert health["Integration"]["Type"] == "MOCK"
    (response,) = health["Integration"]["IntegrationResponses"]
    assert response["StatusCode"] == "200"
    assert response["ResponseTemplates"] == {"application/json": '{"status": "ok"}'}
    # And the other public path still reaches the function (it generates the API description)
    assert {p for (verb, p), m in methods.items() if m["Integration"]["Type"] == "AWS_PROXY"} >= PUBLIC - {"/health"}


def test_anonymous_paths_have_their_own_small_throttles_apart_from_the_tenants(
    stack: cdk.Stack, base: FunctionBase, code: Path,
) -> None:
    template = _api(stack, base, code, "cognito")
    (stage,) = template.find_resources("AWS::ApiGateway::Stage").values()
    settings = {(s["HttpMethod"], s["ResourcePath"][1:].replace("~1", "/")): (s.get("ThrottlingRateLimit"),
                                                                         s.get("ThrottlingBurstLimit"))
                for s in stage["Properties"]["MethodSettings"]}

    # The tenants' calls (ANY /{proxy+}) keep the stage's throttle; each public GET has a smaller bucket of
    # its own (API Gateway applies throttles per method), so anonymous traffic takes a bounded share of the
    # function's concurrency
    assert settings.pop(("*", "*")) == (20, 40)
    assert set(settings) == {("GET", path) for path in PUBLIC}
    assert all(rate <= 10 and burst <= 20 for rate, burst in settings.values())


def _policy(template: Template) -> list[dict[str, Any]]:
    (api,) = template.find_resources("AWS::ApiGateway::RestApi").values()
    return api["Properties"]["Policy"]["Statement"]  # type: ignore[no-any-return]


PUBLIC_RESOURCES = ["execute-api:/*/GET/health", "execute-api:/*/GET/openapi.json"]


def test_the_resource_policy_admits_the_listed_principals_and_denies_everyone_else(
    stack: cdk.Stack, base: FunctionBase, code: Path,
) -> None:
    # Given an allow-list of an account and a role of another account
    role = "arn:aws:iam::210987654321:role/payments-ci"
    Api(stack, "Api", base=base, code=code, auth="iam", stage_name="test", rate_limit=20, burst_limit=40,
        principals=("123456789012", role))
    admitted, public, everyone_else = _policy(Template.from_stack(stack))

    # Then those two may invoke every route (a caller of another account also needs its own IAM policy)
    assert admitted["Effect"] == "Allow" and admitted["Action"] == "execute-api:Invoke"
    assert admitted["Resource"] == "execute-api:/*"
    assert stack.resolve(admitted["Principal"]["AWS"])[1] == role
    assert "123456789012:root" in json.dumps(admitted["Principal"])
    # And anyone may GET the public paths (a browser, a probe: unsigned)
    assert (public["Effect"], public["Principal"], public["Resource"]) == ("Allow", {"AWS": "*"}, PUBLIC_RESOURCES)
    # And every other caller is denied everything else, whatever its own IAM policies allow
    assert everyone_else["Effect"] == "Deny" and everyone_else["Principal"] == {"AWS": "*"}
    assert everyone_else["NotResource"] == PUBLIC_RESOURCES
    assert everyone_else["Condition"] == {"StringNotEquals": {"aws:PrincipalAccount": ["123456789012"]},
                                          "ArnNotEquals": {"aws:PrincipalArn": [role]}}


def test_without_principals_the_resource_policy_admits_the_deploying_account_only(
    stack: cdk.Stack, base: FunctionBase, code: Path,
) -> None:
    admitted, _public, everyone_else = _policy(_api(stack, base, code, "iam"))

    assert ":root" in json.dumps(admitted["Principal"]) and "AWS::AccountId" in json.dumps(admitted["Principal"])
    assert everyone_else["Condition"] == {"StringNotEquals": {"aws:PrincipalAccount": [{"Ref": "AWS::AccountId"}]}}


def test_with_cognito_the_user_pool_admits_and_there_is_no_resource_policy(
    stack: cdk.Stack, base: FunctionBase, code: Path,
) -> None:
    (api,) = _api(stack, base, code, "cognito").find_resources("AWS::ApiGateway::RestApi").values()

    assert "Policy" not in api["Properties"]


def test_a_changed_allow_list_redeploys_the_stage(base: FunctionBase, code: Path) -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_lambda as lambda_

    from infra.constructs.function import FunctionBase as Base
    from infra.constructs.function import FunctionNetwork

    def deployment(principals: tuple[str, ...]) -> str:
        stack = cdk.Stack(cdk.App(), "Test")
        vpc = ec2.Vpc(stack, "Vpc", nat_gateways=0, restrict_default_security_group=False, subnet_configuration=[
            ec2.SubnetConfiguration(name="p", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
        network = FunctionNetwork(vpc=vpc, subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
                                  security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc))
        layer = lambda_.LayerVersion.from_layer_version_arn(
            stack, "L", "arn:aws:lambda:eu-west-1:123456789012:layer:l:1")
        Api(stack, "Api", base=Base(layers=[layer], architecture=base.architecture, log_retention=base.log_retention,
                                    network=network),
            code=code, auth="iam", stage_name="test", rate_limit=20, burst_limit=40, principals=principals)
        (name,) = Template.from_stack(stack).find_resources("AWS::ApiGateway::Deployment")
        return name

    # A resource policy takes effect only with a new deployment of the stage: its logical id follows the policy
    assert deployment(("123456789012",)) != deployment(("210987654321",))


def test_the_gateways_own_answers_send_hsts(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    template = _api(stack, base, code, "iam")

    # Its errors (403 of a missing signature or of the resource policy, 429 of the throttle, 5XX)
    for response_type in ("DEFAULT_4XX", "DEFAULT_5XX"):
        template.has_resource_properties("AWS::ApiGateway::GatewayResponse", {
            "ResponseType": response_type,
            "ResponseParameters": {"gatewayresponse.header.Strict-Transport-Security": "'max-age=31536000'"},
        })
    # And GET /health, which it answers itself
    health = _methods_by_path(template)[("GET", "/health")]
    (response,) = health["Integration"]["IntegrationResponses"]
    assert response["ResponseParameters"] == {"method.response.header.Strict-Transport-Security":
                                              "'max-age=31536000'"}
    assert health["MethodResponses"][0]["ResponseParameters"] == {
        "method.response.header.Strict-Transport-Security": True}


def test_a_custom_domain_is_regional_and_takes_tls_1_2_only(stack: cdk.Stack, base: FunctionBase, code: Path) -> None:
    from infra.config import CustomDomain

    certificate = "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"
    Api(stack, "Api", base=base, code=code, auth="iam", stage_name="test", rate_limit=20, burst_limit=40,
        domain=CustomDomain("api.example.com", certificate))
    template = Template.from_stack(stack)

    template.has_resource_properties("AWS::ApiGateway::DomainName", {
        "DomainName": "api.example.com", "RegionalCertificateArn": certificate, "SecurityPolicy": "TLS_1_2",
        "EndpointConfiguration": {"Types": ["REGIONAL"]},
    })
    template.has_resource_properties("AWS::ApiGateway::BasePathMapping", {
        "DomainName": {"Ref": Match.string_like_regexp("^ApiDomain")},
        "RestApiId": {"Ref": Match.string_like_regexp("^ApiRestApi")},
        "Stage": {"Ref": Match.string_like_regexp("^ApiRestApiDeploymentStagetest")},
    })


def test_the_gateway_sends_the_same_hsts_as_the_function() -> None:
    from infra.constructs.api import HSTS
    from jobrunner.api.app import TRANSPORT_HEADERS

    assert TRANSPORT_HEADERS["Strict-Transport-Security"] == HSTS
