"""The HTTP API: API Gateway (REST, regional) in front of the api function (proxy integration).

``GET`` on the public paths is open: ``/health`` and ``/openapi.json``, because a browser cannot sign
requests and neither reads tenant data. (The dashboard's static files are not the API's: CloudFront serves
them from S3 on the same origin, ``infra/constructs/dashboard.py``.)
Each has its own resource and ``GET`` method without authorization. Everything else, including every
other method on those paths, goes through ``/{proxy+}`` with IAM (SigV4) authorization, or a Cognito user
pool authorizer when ``auth="cognito"``. The api function reads the tenant from the
authorizer context (``jobrunner.api.tenancy``). The stage throttles, writes JSON access logs and
execution logs (errors), and traces with X-Ray.

Anonymous traffic is kept off what the tenants use. API Gateway applies a stage's throttle to each method
on its own, so every tenant call shares one bucket, ``ANY /{proxy+}`` at ``rate_limit``/``burst_limit``; the
public methods get small buckets of their own (``PUBLIC_THROTTLE``), so that they can never take more than
a bounded share of the api function's concurrency, which the tenants' calls need. ``GET /health`` does
not reach the function at all: API Gateway answers it itself (a mock integration), so a probe hammering it
costs no invocation and no VPC cold start, and proves the gateway and the stage are up.

Who may call it (``auth="iam"``): the API's resource policy allows the listed accounts and IAM principals
(``principals``; none given: the deploying account) and denies every other caller, on every path but the public
``GET``s, which it allows to anyone. A caller of another account needs both this policy and its own IAM policy;
one of a listed account needs its own IAM policy only. With Cognito the user pool admits the tenants.

Every response carries ``Strict-Transport-Security``: the function's (``jobrunner.api.app``), the gateway's own
errors (its default 4XX and 5XX responses) and ``GET /health``'s. Optionally the API has a domain of the user's
(``domain``), regional, with the TLS 1.2 security policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.constructs.function import FunctionBase, JobRunnerFunction
from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from infra.config import CustomDomain

#: path -> why it may be read without authentication (the reason given to cdk-nag for that method).
PUBLIC_GETS: dict[str, str] = {
    "/health": "GET /health is public: a liveness probe answering a constant, it reads nothing tenant-specific.",
    "/openapi.json": "GET /openapi.json is public: the API description generated from the code, the same for "
                     "every tenant; the dashboard's API reference fetches it before any token is pasted.",
}


#: (requests per second, burst) of each public method, apart from the tenants' stage throttle. The dashboard
#: fetches the API description once per visit to its API view; /health is for probes and monitors.
PUBLIC_THROTTLE: dict[str, tuple[int, int]] = {"/health": (10, 20), **{path: (5, 10) for path in PUBLIC_GETS
                                                                        if path != "/health"}}
#: What GET /health answers (the same as the api function's own /health, which the local stack serves).
HEALTH_BODY = '{"status": "ok"}'
#: Strict-Transport-Security of the gateway's own responses: a year, as the api function sends it.
HSTS = "max-age=31536000"
INVOKE = "execute-api:Invoke"


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: FunctionBase,
        code: Path,
        auth: str,
        stage_name: str,
        rate_limit: int,
        burst_limit: int,
        memory_size: int = 512,
        deletion_protection: bool = False,
        principals: Sequence[str] = (),
        domain: CustomDomain | None = None,
        tracing: bool = True,
    ) -> None:
        """``principals``: account IDs and IAM ARNs admitted with ``auth="iam"`` (empty: the deploying account);
        ``tracing``: X-Ray on the stage (its sampled requests are traced through the function too)."""
        super().__init__(scope, construct_id)
        if auth not in ("iam", "cognito"):
            raise ValueError(f"auth must be iam or cognito, not {auth!r}")
        self.handler = JobRunnerFunction(
            self, "Handler", base=base, code=code, in_vpc=True, description="HTTP API",
            memory_size=memory_size, timeout=Duration.seconds(29),
        )
        access_logs = logs.LogGroup(self, "AccessLogs", retention=base.log_retention,
                                    removal_policy=RemovalPolicy.DESTROY)
        self.rest_api = apigw.RestApi(
            self, "RestApi",
            description="Distributed Job Runner",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            policy=admission_policy(principals) if auth == "iam" else None,
            # Execution logs need API Gateway's account-wide logging role; it is kept on deletion because
            # other APIs of the account and region use the same setting.
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN,
            deploy_options=apigw.StageOptions(
                stage_name=stage_name,
                throttling_rate_limit=rate_limit,
                throttling_burst_limit=burst_limit,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True, http_method=True, ip=True, protocol=True, request_time=True, resource_path=True,
                    response_length=True, status=True, user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                metrics_enabled=True,
                tracing_enabled=tracing,
                method_options={f"{path}/GET": apigw.MethodDeploymentOptions(
                    throttling_rate_limit=rate, throttling_burst_limit=burst,
                ) for path, (rate, burst) in PUBLIC_THROTTLE.items()},
            ),
        )
        # The gateway checks required parameters; bodies have no gateway model, the handler validates
        # them (Pydantic) and answers 422 naming the field.
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_parameters=True, validate_request_body=True,
        )
        integration = apigw.LambdaIntegration(self.handler.function)
        self.user_pool: cognito.UserPool | None = None
        self.user_pool_client: cognito.UserPoolClient | None = None
        authorization_type, authorizer = self._authorization(auth, deletion_protection=deletion_protection)
        self.public_methods: dict[str, apigw.Method] = {}
        for path, reason in PUBLIC_GETS.items():
            is_health = path == "/health"
            method = self.rest_api.root.resource_for_path(path).add_method(
                "GET", _health_integration() if is_health else integration,
                authorization_type=apigw.AuthorizationType.NONE, request_validator=validator,
                method_responses=[apigw.MethodResponse(
                    status_code="200", response_parameters={_HSTS_PARAMETER: True})] if is_health else None,
            )
            # On the method, not its resource: a method added under these paths later is not covered.
            acknowledge(method, {"AwsSolutions-APIG4": reason, "AwsSolutions-COG4": reason})
            self.public_methods[path] = method
        proxy = self.rest_api.root.add_resource("{proxy+}")
        proxy.add_method("ANY", integration, request_validator=validator,
                         request_parameters={"method.request.path.proxy": True},
                         authorization_type=authorization_type, authorizer=authorizer)
        for response_type in (apigw.ResponseType.DEFAULT_4_XX, apigw.ResponseType.DEFAULT_5_XX):
            self.rest_api.add_gateway_response(f"Gateway{response_type.response_type}", type=response_type,
                                               response_headers={"Strict-Transport-Security": f"'{HSTS}'"})
        self.domain = self._domain(domain) if domain is not None else None
        acknowledge(self.rest_api, {
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs]": "API Gateway's account-level logging role needs exactly this "
                                                    "AWS managed policy.",
        })
        if auth == "iam":
            acknowledge(proxy, {
                "AwsSolutions-COG4": "Authorization is IAM (SigV4), the default of this deployment "
                                     "(api_auth=iam); Cognito is the alternative.",
            })

    def _authorization(self, auth: str, *, deletion_protection: bool,
                       ) -> tuple[apigw.AuthorizationType, apigw.IAuthorizer | None]:
        if auth == "iam":
            return apigw.AuthorizationType.IAM, None
        self.user_pool = cognito.UserPool(
            self, "Users",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True),
            password_policy=cognito.PasswordPolicy(
                min_length=12, require_digits=True, require_lowercase=True, require_uppercase=True,
                require_symbols=True,
            ),
            mfa=cognito.Mfa.OPTIONAL,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            # Kept on update and delete (its users), not when its creation rolls back.
            removal_policy=RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
            deletion_protection=deletion_protection,
        )
        acknowledge(self.user_pool, {
            "AwsSolutions-COG2": "API tenants are programs signing in with SRP or a password; MFA is offered "
                                 "(optional TOTP) but cannot be required of them.",
            "AwsSolutions-COG8": "The Essentials plan: threat protection (Plus) is billed per active user, and "
                                 "accounts are created by an administrator only (no self sign-up).",
        })
        self.user_pool_client = self.user_pool.add_client(
            "Client",
            auth_flows=cognito.AuthFlow(user_srp=True, user_password=True),
            generate_secret=False,
            id_token_validity=Duration.hours(1),
            access_token_validity=Duration.hours(1),
            prevent_user_existence_errors=True,
        )
        authorizer = apigw.CognitoUserPoolsAuthorizer(self, "Authorizer", cognito_user_pools=[self.user_pool])
        return apigw.AuthorizationType.COGNITO, authorizer

    def _domain(self, domain: CustomDomain) -> apigw.DomainName:
        """The stage on the user's domain, TLS 1.2 only; the DNS record (a CNAME to its target) is the user's."""
        name = apigw.DomainName(
            self, "Domain", domain_name=domain.domain_name,
            certificate=acm.Certificate.from_certificate_arn(self, "Certificate", domain.certificate_arn),
            endpoint_type=apigw.EndpointType.REGIONAL, security_policy=apigw.SecurityPolicy.TLS_1_2,
        )
        name.add_base_path_mapping(self.rest_api, stage=self.rest_api.deployment_stage)
        return name

    @property
    def url(self) -> str:
        return self.rest_api.url


def admission_policy(principals: Sequence[str]) -> iam.PolicyDocument:
    """The resource policy of an IAM-authorized API: the principals (account IDs or IAM ARNs; none: the deploying
    account) may invoke it, anyone may ``GET`` the public paths, and every other caller is denied everything else
    (an explicit deny, which no IAM policy of the caller's can lift)."""
    accounts = [p for p in principals if p.isdigit()] or ([] if principals else [Aws.ACCOUNT_ID])
    arns = [p for p in principals if not p.isdigit()]
    public = [f"execute-api:/*/GET{path}" for path in PUBLIC_GETS]
    unlisted: dict[str, dict[str, list[str]]] = {}
    if accounts:
        unlisted["StringNotEquals"] = {"aws:PrincipalAccount": accounts}
    if arns:
        unlisted["ArnNotEquals"] = {"aws:PrincipalArn": arns}
    return iam.PolicyDocument(statements=[
        iam.PolicyStatement(sid="AdmittedCallers", actions=[INVOKE], resources=["execute-api:/*"],
                            principals=[*(iam.AccountPrincipal(a) for a in accounts),
                                        *(iam.ArnPrincipal(a) for a in arns)]),
        iam.PolicyStatement(sid="PublicPaths", actions=[INVOKE], resources=public, principals=[iam.AnyPrincipal()]),
        iam.PolicyStatement(sid="EveryoneElse", effect=iam.Effect.DENY, actions=[INVOKE], not_resources=public,
                            principals=[iam.AnyPrincipal()], conditions=unlisted),
    ])


_HSTS_PARAMETER = "method.response.header.Strict-Transport-Security"


def _health_integration() -> apigw.MockIntegration:
    """API Gateway answers ``GET /health`` itself: 200 with ``HEALTH_BODY``."""
    return apigw.MockIntegration(
        request_templates={"application/json": '{"statusCode": 200}'},
        passthrough_behavior=apigw.PassthroughBehavior.WHEN_NO_TEMPLATES,
        integration_responses=[apigw.IntegrationResponse(
            status_code="200", response_templates={"application/json": HEALTH_BODY},
            response_parameters={_HSTS_PARAMETER: f"'{HSTS}'"},
        )],
    )
