"""Who is calling, on the request contexts API Gateway (REST, proxy integration) builds for each kind of
caller: IAM users, assumed roles, federated users, Cognito identity pools, Cognito user pools and Lambda
authorizers. The shapes follow what API Gateway puts in ``requestContext`` (unset fields are null)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from jobrunner import wiring
from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.api.app import handle
from jobrunner.api.tenancy import Tenancy
from jobrunner.config import Settings
from jobrunner.wiring import Container

ACCOUNT = "123456789012"
NOBODY = {"cognitoIdentityPoolId": None, "accountId": None, "cognitoIdentityId": None, "caller": None,
          "sourceIp": "203.0.113.7", "principalOrgId": None, "accessKey": None, "cognitoAuthenticationType": None,
          "cognitoAuthenticationProvider": None, "userArn": None, "userAgent": "test", "user": None}


def iam(user_arn: str, caller: str, **extra: Any) -> dict[str, Any]:
    """The context of a SigV4-signed request (the method's authorization type AWS_IAM)."""
    identity = {**NOBODY, "accountId": ACCOUNT, "caller": caller, "user": caller, "accessKey": "ASIAEXAMPLE",
                "userArn": user_arn, **extra}
    return {"requestContext": {"identity": identity}}


def iam_user(name: str = "alice") -> dict[str, Any]:
    return iam(f"arn:aws:iam::{ACCOUNT}:user/{name}", "AIDAEXAMPLEUSER")


def assumed_role(role: str, session: str) -> dict[str, Any]:
    return iam(f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}", f"AROAEXAMPLEROLE:{session}")


def federated_user(name: str) -> dict[str, Any]:
    return iam(f"arn:aws:sts::{ACCOUNT}:federated-user/{name}", f"{ACCOUNT}:{name}")


def identity_pool(identity_id: str | None, kind: str) -> dict[str, Any]:
    return iam(f"arn:aws:sts::{ACCOUNT}:assumed-role/Cognito_AppAuth_Role/CognitoIdentityCredentials",
               "AROAEXAMPLEPOOL:CognitoIdentityCredentials", cognitoIdentityPoolId="us-east-1:pool-guid",
               cognitoIdentityId=identity_id, cognitoAuthenticationType=kind,
               cognitoAuthenticationProvider="cognito-idp.us-east-1.amazonaws.com/us-east-1_Example")


def user_pool(sub: str) -> dict[str, Any]:
    claims = {"sub": sub, "cognito:username": "carol", "token_use": "id", "iss": "https://example/us-east-1_Example"}
    return {"requestContext": {"identity": NOBODY, "authorizer": {"claims": claims}}}


def lambda_authorizer(principal: str) -> dict[str, Any]:
    return {"requestContext": {"identity": NOBODY, "authorizer": {"principalId": principal, "integrationLatency": 3}}}


ROLE = f"arn:aws:iam::{ACCOUNT}:role/Payments"


@pytest.mark.parametrize(("event", "tenant"), [
    (iam_user(), f"arn:aws:iam::{ACCOUNT}:user/alice"),
    (iam(f"arn:aws:iam::{ACCOUNT}:root", ACCOUNT), f"arn:aws:iam::{ACCOUNT}:root"),
    (assumed_role("Payments", "ecs-task-7f3a"), ROLE),
    (assumed_role("Payments", "i-0abc123"), ROLE),
    (iam(f"arn:aws-cn:sts::{ACCOUNT}:assumed-role/Payments/s", "AROAX:s"), f"arn:aws-cn:iam::{ACCOUNT}:role/Payments"),
    (identity_pool("us-east-1:1111-aaaa", "authenticated"), "cognito-identity:us-east-1:1111-aaaa"),
    (user_pool("8d1e-sub"), "8d1e-sub"),
    (lambda_authorizer("team-a"), "team-a"),
], ids=["iam-user", "root", "role-session-1", "role-session-2", "role-other-partition", "identity-pool",
        "user-pool", "lambda-authorizer"])
def test_each_kind_of_caller_gets_a_stable_tenant(event: dict[str, Any], tenant: str) -> None:
    assert Tenancy().tenant_of(event) == tenant


@pytest.mark.parametrize(("event", "reason"), [
    (federated_user("bob"), "a federated user is a tenant only when JOBRUNNER_TENANT_MAP maps it to one"),
    (identity_pool("us-east-1:2222-bbbb", "unauthenticated"), "an unauthenticated Cognito identity is not a tenant"),
    ({"requestContext": {"identity": NOBODY}}, "no authenticated tenant"),
], ids=["federated-user", "unauthenticated-identity", "anonymous"])
def test_callers_whose_name_anyone_could_pick_are_refused_with_the_reason(event: dict[str, Any], reason: str) -> None:
    caller = Tenancy().identify(event)
    assert (caller.tenant, caller.refusal) == (None, reason)


def test_the_tenant_map_names_principals_tenants_including_federated_users() -> None:
    tenancy = Tenancy({ROLE: "payments", f"arn:aws:iam::{ACCOUNT}:user/alice": "payments",
                       f"arn:aws:sts::{ACCOUNT}:federated-user/bob": "bob-team"})
    assert tenancy.tenant_of(assumed_role("Payments", "any")) == "payments"
    assert tenancy.tenant_of(iam_user()) == "payments"
    assert tenancy.tenant_of(federated_user("bob")) == "bob-team"
    assert tenancy.tenant_of(federated_user("mallory")) is None
    assert tenancy.tenant_of(iam_user("carol")) == f"arn:aws:iam::{ACCOUNT}:user/carol"


# -- through the API ------------------------------------------------------------------------------------


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> MemoryJobStore:
    store = MemoryJobStore()
    monkeypatch.setattr(wiring, "_container", None)  # restored after the test
    settings = Settings.from_env({"JOBRUNNER_SEGMENTS": "4",
                                  "JOBRUNNER_TENANT_MAP": json.dumps({f"arn:aws:sts::{ACCOUNT}:federated-user/bob":
                                                                      "bob-team"})})
    wiring.install(Container(settings, store=store, publisher=MemoryPublisher(), leases=MemoryLeaseStore(),
                             invoker=RecordingInvoker(), clock=ManualClock(datetime(2026, 11, 22, 10, tzinfo=UTC))))
    return store


def request(context: dict[str, Any], method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    event = {"resource": path, "path": path, "httpMethod": method, "headers": {"Content-Type": "application/json"},
             "multiValueHeaders": {}, "queryStringParameters": None, "multiValueQueryStringParameters": None,
             "pathParameters": None, "stageVariables": None,
             "requestContext": {"requestId": "r", "stage": "test", "httpMethod": method, "path": path,
                                **context["requestContext"]},
             "body": None if body is None else json.dumps(body), "isBase64Encoded": False}
    response = handle(event, None)
    return int(response["statusCode"]), json.loads(response["body"])


def test_every_session_of_a_role_sees_the_same_jobs_and_a_session_name_is_no_way_in(store: MemoryJobStore) -> None:
    # Given a job submitted by one ECS task of the Payments role
    status, job = request(assumed_role("Payments", "task-1"), "POST", "/jobs", {"schedule": {"every": "PT5M"}})
    assert status == 201
    # Then another task of the same role (a new session name) finds it
    assert request(assumed_role("Payments", "task-2"), "GET", f"/jobs/{job['job_id']}")[0] == 200
    # and a caller of another role who names its session after the first role's session does not
    assert request(assumed_role("Reporting", "task-1"), "GET", f"/jobs/{job['job_id']}")[0] == 404
    assert {user for user, _ in store.jobs} == {ROLE}


def test_a_federated_user_acts_only_through_the_tenant_map(store: MemoryJobStore) -> None:
    status, body = request(federated_user("mallory"), "POST", "/jobs", {"schedule": {"every": "PT5M"}})
    assert (status, body["error"]) == (401, "unauthenticated")
    assert "federated user" in body["message"]
    assert request(federated_user("bob"), "POST", "/jobs", {"schedule": {"every": "PT5M"}})[0] == 201
    assert {user for user, _ in store.jobs} == {"bob-team"}
