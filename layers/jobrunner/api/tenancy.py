"""Who is calling: the tenant comes from the API Gateway authorizer context, never from the body.

- Lambda authorizer or the local stack: ``requestContext.authorizer.principalId``
- Cognito user pool authorizer: ``requestContext.authorizer.claims.sub``
- IAM (SigV4): ``requestContext.identity.userArn`` (or ``caller``)
"""

from __future__ import annotations

from typing import Any


def tenant_of(event: dict[str, Any]) -> str | None:
    context = event.get("requestContext") or {}
    authorizer = context.get("authorizer") or {}
    if authorizer.get("principalId"):
        return str(authorizer["principalId"])
    claims = authorizer.get("claims") or {}
    if claims.get("sub"):
        return str(claims["sub"])
    identity = context.get("identity") or {}
    for key in ("userArn", "caller"):
        if identity.get(key):
            return str(identity[key])
    return None
