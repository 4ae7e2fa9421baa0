"""The web dashboard in AWS: its static files in a private S3 bucket, served by CloudFront on one origin with the API.

The page calls the API relative to its own path and its Content-Security-Policy allows requests to its own
origin only (``connect-src 'self'``), so page and API must share an origin, as they do locally
(``devstack/gateway.py``). One CloudFront distribution gives them one:

- ``/ui*`` is the dashboard: S3 through origin access control (the bucket stays private, blocks public access,
  takes TLS only), the paths mapped to the bucket's keys by a CloudFront function built from the same table the
  local gateway answers by (``devstack.dashboard.routes``): ``/ui`` is the page, ``/ui/<file>`` its scripts and
  styles, anything else under ``/ui`` a 404. The responses carry the same security headers as locally
  (``devstack.dashboard.SECURITY_HEADERS``), plus HSTS.
- Every other path goes to the API Gateway stage (the default behaviour), uncached, with every header but
  ``Host`` (the bearer token included), query string and cookie: ``https://<distribution>/jobs`` is
  ``<ApiUrl>jobs``. The default is the API rather than the files so that every API route, present or future,
  reaches the gateway, which keeps answering unknown ones itself.
- ``/ui/runbooks`` is ``docs/runbooks.md`` as a page (``infra.runbooks``), one more file of the table: each
  alarm's description links its section there (``runbooks_url``), unless the stage names another copy
  (``runbook_url``). Like the dashboard's files, it is public: it holds procedures, no secrets.

Every behaviour sends HSTS: the files with the local gateway's headers, the API paths with a policy of their own
(HSTS, ``nosniff``, ``DENY`` framing, no referrer). CloudFront's default certificate (``*.cloudfront.net``) accepts
TLS 1.0 and its viewer policy cannot be changed; with ``domain`` (a name of the user's and its ACM certificate, in
us-east-1) the distribution answers on that name with TLS 1.2 at least (``TLSv1.2_2021``).

A bearer token (``api_auth=cognito``) passes through CloudFront unchanged. A SigV4 signature does not: it signs
the ``Host`` the client called, and the gateway sees its own. With ``api_auth=iam`` the CLI and the SDK keep
calling ``ApiUrl``; the dashboard, which cannot sign, needs a Cognito stage to read data (docs/deploy.md).

The files are deployed from ``dashboard/`` at every deploy (``BucketDeployment``), with ``Cache-Control:
no-cache``, so a deployment shows at once without an invalidation. The bucket holds nothing but a copy of
those files: unversioned, and emptied and deleted with the stack.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from aws_cdk import DefaultStackSynthesizer, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk.region_info import RegionInfo
from constructs import Construct

from devstack.dashboard import PREFIX, SECURITY_HEADERS, routes
from infra import runbooks
from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from pathlib import Path

    from aws_cdk import aws_apigateway as apigw

    from infra.config import CustomDomain

#: The bucket's keys: the files under this prefix, so that a path maps to a key by adding at most a name.
KEY_PREFIX = PREFIX.lstrip("/") + "/"
#: A year, as browsers remember HSTS; CloudFront answers only over HTTPS (HTTP is redirected).
HSTS_MAX_AGE = Duration.days(365)
#: The runbooks page: its path, and its file among the dashboard's (not in ``dashboard/``: built at synth).
RUNBOOKS_PATH = f"{PREFIX}/runbooks"
RUNBOOKS_FILE = "runbooks.html"


class Dashboard(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, files: Path, rest_api: apigw.RestApi,
                 domain: CustomDomain | None = None) -> None:
        super().__init__(scope, construct_id)
        self.domain = domain
        table = routes(files)
        served = {**table, RUNBOOKS_PATH: RUNBOOKS_FILE}
        self.bucket = s3.Bucket(
            self, "Files",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            # A copy of files kept in git, replaced at every deploy: no versions to keep, nothing to retain.
            versioned=False,
            removal_policy=RemovalPolicy.DESTROY,
        )
        acknowledge(self.bucket, {
            "AwsSolutions-S1": "No server access logs: the bucket holds a copy of the dashboard's public static "
                               "files, written only by the deployment and read only by CloudFront.",
        })
        self.distribution = cloudfront.Distribution(
            self, "Distribution",
            comment="Job runner: the dashboard (/ui) and the API on one origin",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.RestApiOrigin(rest_api),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
                cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
                origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
                response_headers_policy=self._api_headers_policy(),
            ),
            additional_behaviors={f"{PREFIX}*": cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self._headers_policy(),
                function_associations=[cloudfront.FunctionAssociation(
                    event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                    function=cloudfront.Function(
                        self, "Paths", comment="The dashboard's paths to its files in S3; anything else 404",
                        runtime=cloudfront.FunctionRuntime.JS_2_0,
                        code=cloudfront.FunctionCode.from_inline(paths_function(served)),
                    ),
                )],
            )},
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            **self._viewer_certificate(domain),
        )
        acknowledge(self.distribution, {
            "AwsSolutions-CFR1": "No geo restriction: the dashboard and the API serve their tenants wherever they "
                                 "are; every data call is authenticated.",
            "AwsSolutions-CFR2": "No CloudFront-scoped web ACL (it must be created in us-east-1, outside this "
                                 "stack): the API paths reach the API stage, which has its regional web ACL where "
                                 "waf_rate_limit is on; every route but the static files, /health and /openapi.json "
                                 "is authenticated and the stage throttles.",
            "AwsSolutions-CFR3": "No CloudFront access logs: every API request is logged by the API Gateway stage's "
                                 "access log; the rest are the dashboard's public static files.",
        })
        if domain is None:
            acknowledge(self.distribution, {
                "AwsSolutions-CFR4": "The distribution uses CloudFront's default certificate (dashboard_domain null), "
                                     "with which the viewer TLS policy cannot be set; dashboard_domain pins "
                                     "TLSv1.2_2021 (docs/deploy.md).",
            })
        self.deployment = s3deploy.BucketDeployment(
            self, "Deploy",
            sources=[s3deploy.Source.asset(str(files), exclude=_not_served(files, table)),
                     s3deploy.Source.data(RUNBOOKS_FILE, runbooks.page(runbooks.RUNBOOKS_MD.read_text()))],
            destination_bucket=self.bucket,
            destination_key_prefix=KEY_PREFIX,
            cache_control=[s3deploy.CacheControl.no_cache()],
            prune=True,
            retain_on_delete=False,  # emptied with the stack, so that the bucket can be deleted
        )
        self._acknowledge_deployment()

    def _acknowledge_deployment(self) -> None:
        """The copying function is CDK's own (one per stack, not in the VPC), its policy written by CDK."""
        bucket_arn = Stack.of(self).resolve(cast("s3.CfnBucket", self.bucket.node.default_child).logical_id)
        reason = ("CDK's BucketDeployment function copies the dashboard's files from the asset bucket to this one; "
                  "its policy is CDK's, scoped to those two buckets: {}.")
        acknowledge(self.deployment.handler_role.node.scope, {  # type: ignore[arg-type]  # the function, a construct
            "AwsSolutions-L1": "CDK's BucketDeployment function: its runtime is the one CDK builds and tests it with.",
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]":
                "CDK's BucketDeployment function logs with the AWS managed basic execution policy, its only one.",
            **{f"AwsSolutions-IAM5[{finding}]": reason.format(why) for finding, why in {
                "Action::s3:GetObject*": "it reads the asset's objects",
                "Action::s3:GetBucket*": "it reads the buckets' locations",
                "Action::s3:List*": "it lists both buckets to sync and prune",
                "Action::s3:DeleteObject*": "it prunes files no longer in dashboard/",
                "Action::s3:Abort*": "it aborts its own failed multipart uploads",
                f"Resource::{_asset_objects(Stack.of(self))}":
                    "the objects of CDK's asset bucket, where the zipped files are uploaded",
                f"Resource::<{bucket_arn}.Arn>/*": "every object of the dashboard's own bucket",
            }.items()},
        })

    def _viewer_certificate(self, domain: CustomDomain | None) -> dict[str, Any]:
        """The distribution's names and certificate: the user's domain with TLS 1.2 at least, or CloudFront's own."""
        if domain is None:
            return {}
        return {
            "domain_names": [domain.domain_name],
            "certificate": acm.Certificate.from_certificate_arn(self, "Certificate", domain.certificate_arn),
            "minimum_protocol_version": cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021,
            "ssl_support_method": cloudfront.SSLMethod.SNI,
        }

    def _api_headers_policy(self) -> cloudfront.ResponseHeadersPolicy:
        """The API paths' security headers: HSTS as on the files, and what suits any response of the API."""
        return cloudfront.ResponseHeadersPolicy(
            self, "ApiHeaders", comment="The API paths' security headers",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=HSTS_MAX_AGE, include_subdomains=False, override=True),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True),
            ),
        )

    def _headers_policy(self) -> cloudfront.ResponseHeadersPolicy:
        """The local gateway's security headers (``devstack.dashboard.SECURITY_HEADERS``), and HSTS."""
        headers = dict(SECURITY_HEADERS)
        referrer = headers.pop("Referrer-Policy").upper().replace("-", "_")
        headers.pop("X-Content-Type-Options")  # nosniff, its only value: content_type_options below
        policy = cloudfront.ResponseHeadersPolicy(
            self, "Headers", comment="The dashboard's security headers",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=headers.pop("Content-Security-Policy"), override=True),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy[referrer], override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=HSTS_MAX_AGE, include_subdomains=False, override=True),
            ),
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(custom_headers=[
                cloudfront.ResponseCustomHeader(header=name, value=value, override=True)
                for name, value in headers.items()
            ]),
        )
        return policy

    @property
    def host(self) -> str:
        """The name viewers use: the user's domain when there is one, else the distribution's own."""
        return self.domain.domain_name if self.domain else self.distribution.distribution_domain_name

    @property
    def url(self) -> str:
        """The dashboard's address; the API is at the same origin's root."""
        return f"https://{self.host}{PREFIX}"

    @property
    def runbooks_url(self) -> str:
        """The runbooks page's address; a section's is this with ``#<anchor>``."""
        return f"https://{self.host}{RUNBOOKS_PATH}"


def paths_function(table: dict[str, str]) -> str:
    """The viewer-request function of ``/ui*``: a known path goes to its key in the bucket, anything else is a
    404 (so no other key, and no path outside the table, can be asked for)."""
    keys = {path: f"/{KEY_PREFIX}{name}" for path, name in sorted(table.items())}
    return (
        f"var KEYS = {json.dumps(keys)};\n"
        "function handler(event) {\n"
        "  var request = event.request;\n"
        "  if (!Object.prototype.hasOwnProperty.call(KEYS, request.uri)) {\n"
        "    return {statusCode: 404, statusDescription: 'Not Found'};\n"
        "  }\n"
        "  request.uri = KEYS[request.uri];\n"
        "  return request;\n"
        "}\n"
    )


def _asset_objects(stack: Stack) -> str:
    """The objects of the stack's CDK asset bucket as cdk-nag names them: with the account and region when the
    stack is pinned to them, else with their placeholders."""
    qualifier = DefaultStackSynthesizer.DEFAULT_QUALIFIER
    if Token.is_unresolved(stack.account) or Token.is_unresolved(stack.region):
        return f"arn:<AWS::Partition>:s3:::cdk-{qualifier}-assets-<AWS::AccountId>-<AWS::Region>/*"
    partition = RegionInfo.get(stack.region).partition
    return f"arn:{partition}:s3:::cdk-{qualifier}-assets-{stack.account}-{stack.region}/*"


def _not_served(files: Path, table: dict[str, str]) -> list[str]:
    """What in ``files`` the table does not serve (its README): left out of the deployment."""
    served = set(table.values())
    return sorted(p.name for p in files.iterdir() if p.name not in served)
