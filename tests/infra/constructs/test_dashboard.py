from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk.assertions import Match, Template

from devstack.dashboard import DASHBOARD_DIR, SECURITY_HEADERS, routes
from infra.constructs.dashboard import Dashboard, paths_function
from infra.runbooks import RUNBOOKS_MD, anchors

if TYPE_CHECKING:
    from collections.abc import Callable

    import aws_cdk as cdk


def _dashboard(stack: cdk.Stack) -> Dashboard:
    from aws_cdk import aws_apigateway as apigw

    api = apigw.RestApi(stack, "Api", deploy_options=apigw.StageOptions(stage_name="test"))
    api.root.add_method("GET", apigw.MockIntegration())
    return Dashboard(stack, "Dashboard", files=DASHBOARD_DIR, rest_api=api)


@pytest.fixture
def template(stack: cdk.Stack) -> Template:
    _dashboard(stack)
    return Template.from_stack(stack)


def _distribution(template: Template) -> dict[str, Any]:
    (distribution,) = template.find_resources("AWS::CloudFront::Distribution").values()
    return distribution["Properties"]["DistributionConfig"]  # type: ignore[no-any-return]


def _origin(config: dict[str, Any], behaviour: dict[str, Any]) -> dict[str, Any]:
    (origin,) = [o for o in config["Origins"] if o["Id"] == behaviour["TargetOriginId"]]
    return origin  # type: ignore[no-any-return]


def test_the_bucket_is_private_encrypted_and_takes_tls_only(template: Template) -> None:
    template.has_resource_properties("AWS::S3::Bucket", {
        "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                           "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
        "BucketEncryption": {"ServerSideEncryptionConfiguration": [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
        "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
    })
    (policy,) = template.find_resources("AWS::S3::BucketPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    # Then TLS is required of everyone, and the only reader is CloudFront, for this distribution
    assert {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}}.items() <= statements[0].items()
    allowed = [s for s in statements if s["Effect"] == "Allow"]
    assert [(s["Principal"], s["Action"]) for s in allowed] == [({"Service": "cloudfront.amazonaws.com"},
                                                                 "s3:GetObject")]
    assert "DashboardDistribution" in json.dumps(allowed[0]["Condition"]["StringEquals"]["AWS:SourceArn"])
    assert '"*"' not in json.dumps(allowed)  # no public principal


def test_cloudfront_reads_the_bucket_through_origin_access_control(template: Template) -> None:
    template.has_resource_properties("AWS::CloudFront::OriginAccessControl", {"OriginAccessControlConfig": {
        "OriginAccessControlOriginType": "s3", "SigningBehavior": "always", "SigningProtocol": "sigv4"}})
    config = _distribution(template)
    (files,) = config["CacheBehaviors"]
    origin = _origin(config, files)
    assert "OriginAccessControlId" in origin and "S3OriginConfig" in origin
    assert origin["S3OriginConfig"].get("OriginAccessIdentity", "") == ""  # not the legacy identity


def test_ui_is_the_dashboard_and_every_other_path_the_api_stage(template: Template) -> None:
    config = _distribution(template)

    (files,) = config["CacheBehaviors"]
    assert files["PathPattern"] == "/ui*"
    assert files["AllowedMethods"] == ["GET", "HEAD"]
    assert files["ViewerProtocolPolicy"] == "redirect-to-https"
    assert files["FunctionAssociations"][0]["EventType"] == "viewer-request"
    # The default behaviour: the API Gateway stage, uncached, with every method and every header but Host
    api = config["DefaultCacheBehavior"]
    assert set(api["AllowedMethods"]) == {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}
    assert api["CachePolicyId"] == "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"  # Managed-CachingDisabled
    assert api["OriginRequestPolicyId"] == "b689b0a8-53d0-40ab-baf2-68738e2966ac"  # AllViewerExceptHostHeader
    assert api["ViewerProtocolPolicy"] == "https-only"
    origin = _origin(config, api)
    assert origin["CustomOriginConfig"] == {"OriginProtocolPolicy": "https-only", "OriginSSLProtocols": ["TLSv1.2"]}
    assert ".execute-api." in json.dumps(origin["DomainName"])
    assert "ApiDeploymentStagetest" in json.dumps(origin["OriginPath"])  # the stage is the origin's path


def test_the_dashboard_has_the_local_gateways_security_headers(template: Template) -> None:
    (files,) = _distribution(template)["CacheBehaviors"]
    policy = template.find_resources("AWS::CloudFront::ResponseHeadersPolicy")[files["ResponseHeadersPolicyId"]["Ref"]]
    config = policy["Properties"]["ResponseHeadersPolicyConfig"]
    security, custom = config["SecurityHeadersConfig"], config["CustomHeadersConfig"]["Items"]

    served = {
        "Content-Security-Policy": security["ContentSecurityPolicy"]["ContentSecurityPolicy"],
        "X-Content-Type-Options": "nosniff" if security["ContentTypeOptions"]["Override"] else None,
        "Referrer-Policy": security["ReferrerPolicy"]["ReferrerPolicy"],
        **{item["Header"]: item["Value"] for item in custom},
    }
    assert served == SECURITY_HEADERS
    assert "connect-src 'self'" in served["Content-Security-Policy"]
    assert all(header["Override"] for header in (*custom, *(v for v in security.values() if isinstance(v, dict))))
    assert security["StrictTransportSecurity"]["AccessControlMaxAgeSec"] == 365 * 24 * 3600


def test_the_files_are_deployed_from_the_dashboard_directory_under_ui(template: Template) -> None:
    template.has_resource_properties("Custom::CDKBucketDeployment", {
        "DestinationBucketName": {"Ref": Match.string_like_regexp("^DashboardFiles")},
        "DestinationBucketKeyPrefix": "ui/",
        "Prune": True,
        "RetainOnDelete": False,
        "SystemMetadata": {"cache-control": "no-cache"},
        # dashboard/'s files, then the runbooks page
        "SourceObjectKeys": [Match.string_like_regexp(r"^[0-9a-f]{64}\.zip$")] * 2,
    })


def test_the_deployed_asset_holds_the_served_files_and_nothing_else(stack: cdk.Stack) -> None:
    # Given the dashboard on a stack, synthesized
    _dashboard(stack)
    assembly = stack.node.root.synth()  # type: ignore[attr-defined]

    # Then the asset directory it uploads is the served files (the README stays out)
    (deployment,) = Template.from_stack(stack).find_resources("Custom::CDKBucketDeployment").values()
    asset = deployment["Properties"]["SourceObjectKeys"][0].removesuffix(".zip")
    uploaded = sorted(p.name for p in (Path(assembly.directory) / f"asset.{asset}").iterdir())
    assert uploaded == sorted(routes().values())
    assert "README.md" not in uploaded


def test_the_paths_function_maps_the_gateways_paths_to_keys_and_refuses_the_rest() -> None:
    node = shutil.which("node")
    assert node, "node runs the CDK; it runs the CloudFront function here too"
    paths = ["/ui", "/ui/app.js", "/ui/app.css", "/ui/", "/ui/index.html", "/ui/README.md", "/ui/../jobs",
             "/ui/%2e%2e/secret", "/uix", "/ui/__proto__", "/ui/constructor"]
    harness = paths_function(routes()) + (
        f"var out = {{}}; {json.dumps(paths)}.forEach(function (uri) {{"
        " var r = handler({request: {uri: uri}}); out[uri] = r.statusCode || r.uri; });"
        " console.log(JSON.stringify(out));"
    )

    answered = json.loads(subprocess.run([node, "-e", harness], capture_output=True, text=True, check=True).stdout)

    assert answered == {
        "/ui": "/ui/index.html", "/ui/app.js": "/ui/app.js", "/ui/app.css": "/ui/app.css",
        **{path: 404 for path in paths[3:]},
    }


def test_the_url_is_the_distributions_ui(stack: cdk.Stack) -> None:
    dashboard = _dashboard(stack)

    parts = stack.resolve(dashboard.url)["Fn::Join"][1]
    (distribution,) = Template.from_stack(stack).find_resources("AWS::CloudFront::Distribution")
    assert parts == ["https://", {"Fn::GetAtt": [distribution, "DomainName"]}, "/ui"]


def test_a_stage_without_the_web_dashboard_creates_no_distribution(
    stack_template: Callable[..., dict[str, Any]],
) -> None:
    # Given a new account that CloudFront refuses until AWS verifies it: the stage turns the web dashboard off (and
    # links the runbooks elsewhere, the dashboard's copy being gone)
    template = stack_template(web_dashboard=False,
                              runbook_url="https://github.com/acme/jobrunner/blob/main/docs/runbooks.md")

    types = {r["Type"] for r in template["Resources"].values()}
    assert not {t for t in types if t.startswith("AWS::CloudFront::")}
    assert "Custom::CDKBucketDeployment" not in types and "AWS::S3::Bucket" not in types
    assert "DashboardUrl" not in template["Outputs"]
    # And the rest of the stack is there, the API and the CloudWatch dashboard included
    assert {"AWS::ApiGateway::RestApi", "AWS::CloudWatch::Dashboard"} <= types
    assert "ApiUrl" in template["Outputs"]


def test_the_runbooks_page_is_one_more_file_of_the_dashboard(stack: cdk.Stack) -> None:
    # Given the dashboard on a stack, synthesized
    dashboard = _dashboard(stack)
    assembly = stack.node.root.synth()  # type: ignore[attr-defined]
    template = Template.from_stack(stack)

    # Then the deployment's second source is docs/runbooks.md as a page, each section at its anchor
    (deployment,) = template.find_resources("Custom::CDKBucketDeployment").values()
    _files, runbooks = deployment["Properties"]["SourceObjectKeys"]
    (page,) = (Path(assembly.directory) / f"asset.{runbooks.removesuffix('.zip')}").iterdir()
    assert page.name == "runbooks.html"  # served as text/html (the deployment types a file by its extension)
    assert all(f'id="{anchor}"' in page.read_text() for anchor in anchors(RUNBOOKS_MD.read_text()))
    # And its address is /ui/runbooks, which the paths function maps to it
    parts = stack.resolve(dashboard.runbooks_url)["Fn::Join"][1]
    (distribution,) = template.find_resources("AWS::CloudFront::Distribution")
    assert parts == ["https://", {"Fn::GetAtt": [distribution, "DomainName"]}, "/ui/runbooks"]
    (function,) = template.find_resources("AWS::CloudFront::Function").values()
    assert '"/ui/runbooks": "/ui/runbooks.html"' in function["Properties"]["FunctionCode"]


def test_every_behaviour_sends_hsts(template: Template) -> None:
    policies = template.find_resources("AWS::CloudFront::ResponseHeadersPolicy")
    config = _distribution(template)

    # Given the files' behaviour and the default one (the API paths)
    for behaviour in (*config["CacheBehaviors"], config["DefaultCacheBehavior"]):
        # Then each has a response headers policy, with HSTS for a year, overriding whatever the origin sends
        policy = policies[behaviour["ResponseHeadersPolicyId"]["Ref"]]["Properties"]["ResponseHeadersPolicyConfig"]
        hsts = policy["SecurityHeadersConfig"]["StrictTransportSecurity"]
        assert hsts["AccessControlMaxAgeSec"] == 365 * 24 * 3600 and hsts["Override"] is True
    api = policies[config["DefaultCacheBehavior"]["ResponseHeadersPolicyId"]["Ref"]]["Properties"]
    security = api["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    assert security["FrameOptions"]["FrameOption"] == "DENY"
    assert security["ContentTypeOptions"]["Override"] is True
    assert security["ReferrerPolicy"]["ReferrerPolicy"] == "no-referrer"


def test_without_a_domain_the_distribution_has_cloudfronts_certificate(template: Template) -> None:
    config = _distribution(template)

    assert "Aliases" not in config
    assert config.get("ViewerCertificate", {"CloudFrontDefaultCertificate": True}) == {
        "CloudFrontDefaultCertificate": True}


def test_a_custom_domain_takes_tls_1_2_at_least(stack: cdk.Stack) -> None:
    from aws_cdk import aws_apigateway as apigw

    from infra.config import CustomDomain

    # Given the dashboard on a domain of the user's, with its certificate (us-east-1, as CloudFront requires)
    certificate = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"
    api = apigw.RestApi(stack, "Api", deploy_options=apigw.StageOptions(stage_name="test"))
    api.root.add_method("GET", apigw.MockIntegration())
    dashboard = Dashboard(stack, "Dashboard", files=DASHBOARD_DIR, rest_api=api,
                          domain=CustomDomain("jobs.example.com", certificate))
    config = _distribution(Template.from_stack(stack))

    # Then the distribution answers on it with TLS 1.2 or later only (SNI: no dedicated IP addresses)
    assert config["Aliases"] == ["jobs.example.com"]
    assert config["ViewerCertificate"] == {"AcmCertificateArn": certificate, "MinimumProtocolVersion": "TLSv1.2_2021",
                                           "SslSupportMethod": "sni-only"}
    assert dashboard.url == "https://jobs.example.com/ui"
    assert dashboard.runbooks_url == "https://jobs.example.com/ui/runbooks"
