"""Who is calling: the tenant comes from the API Gateway request context, never from the body.

The principal is what the authorizer proved, made stable where AWS lets the caller pick a name:

- Lambda authorizer, or the local stack: ``authorizer.principalId``, as given.
- Cognito user pool: ``authorizer.claims.sub`` (the user's id in the pool), as given.
- IAM, an IAM user or the account's root: ``identity.userArn``, as given
  (``arn:aws:iam::123456789012:user/alice``).
- IAM, an assumed role (an ECS task, an EC2 instance, a function, SSO, CI): the role, not the session.
  ``arn:aws:sts::123456789012:assumed-role/Payments/any-session`` acts as
  ``arn:aws:iam::123456789012:role/Payments`` (without the role's path, which the ARN of a session does
  not carry): the session name is the caller's choice, and new for every task.
- IAM, a Cognito identity pool's authenticated identity: ``cognito-identity:<cognitoIdentityId>``, one
  per end user (the pool's role is shared by all of them). An unauthenticated identity is refused:
  anyone can get one.
- IAM, a federated user (``arn:aws:sts::123456789012:federated-user/bob``): refused unless mapped, since
  any principal allowed to call ``sts:GetFederationToken`` picks that name.

Then the tenant is the principal, or what ``JOBRUNNER_TENANT_MAP`` maps it to (several roles of one team
acting as one tenant, say). A federated user is a tenant only through that map.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

_ASSUMED_ROLE = re.compile(r"^arn:(?P<partition>[\w-]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+$")
_FEDERATED_USER = re.compile(r"^arn:[\w-]+:sts::\d{12}:federated-user/.+$")


@dataclass(frozen=True)
class Caller:
    """The outcome of identifying a request: a tenant, or why there is none (for the 401's message)."""

    tenant: str | None
    principal: str | None = None
    refusal: str = "no authenticated tenant"


@dataclass(frozen=True)
class Tenancy:
    #: principal -> tenant, for principals acting as a tenant of another name.
    tenant_map: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: Tenants that may read the operator views.
    operators: frozenset[str] = frozenset()

    def identify(self, event: Mapping[str, Any]) -> Caller:
        principal, refusal = principal_of(event)
        if principal is None:
            return Caller(None, refusal=refusal or "no authenticated tenant")
        if principal in self.tenant_map:
            return Caller(self.tenant_map[principal], principal)
        if refusal is not None:  # a principal that is a tenant only when mapped
            return Caller(None, principal, refusal)
        return Caller(principal, principal)

    def tenant_of(self, event: Mapping[str, Any]) -> str | None:
        return self.identify(event).tenant

    def is_operator(self, tenant: str) -> bool:
        return tenant in self.operators


def principal_of(event: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(principal, refusal): the stable principal of the request, and why it cannot act as itself when it
    needs a mapping (a federated user) or cannot act at all (no principal: refusal says why)."""
    context = event.get("requestContext") or {}
    authorizer = context.get("authorizer") or {}
    if authorizer.get("principalId"):
        return str(authorizer["principalId"]), None
    claims = authorizer.get("claims") or {}
    if claims.get("sub"):
        return str(claims["sub"]), None
    identity = context.get("identity") or {}
    if identity.get("cognitoIdentityId") or identity.get("cognitoAuthenticationType"):
        if identity.get("cognitoAuthenticationType") != "authenticated" or not identity.get("cognitoIdentityId"):
            return None, "an unauthenticated Cognito identity is not a tenant"
        return f"cognito-identity:{identity['cognitoIdentityId']}", None
    arn = str(identity.get("userArn") or "")
    if match := _ASSUMED_ROLE.match(arn):
        return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}", None
    if _FEDERATED_USER.match(arn):
        return arn, "a federated user is a tenant only when JOBRUNNER_TENANT_MAP maps it to one"
    if arn:
        return arn, None
    return None, None
