"""Who calls a stage's API, and how many tenants that makes: the rules that span ``api_principals``, ``api_auth``,
``tenant_map``, ``tenant_limits``, ``operators`` and ``tenant_topics``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol

from infra.config.errors import Refusal

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class Admission(Protocol):
    """What a stage's options say about its tenants (``DeploymentConfig`` has them)."""

    @property
    def stage(self) -> str: ...
    @property
    def api_auth(self) -> str: ...
    @property
    def api_principals(self) -> tuple[str, ...]: ...
    @property
    def tenant_map(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def tenant_limits(self) -> dict[str, Any]: ...
    @property
    def operators(self) -> tuple[str, ...]: ...
    @property
    def tenant_topics(self) -> tuple[tuple[str, tuple[str, ...]], ...]: ...
    @property
    def shared_worker_topics(self) -> bool: ...

_ACCOUNT = re.compile(r"^[0-9]{12}$")
_IAM_ARN = re.compile(r"^arn:(?P<partition>aws[a-z-]*):iam::(?P<account>[0-9]{12}):"
                      r"(?P<kind>root|role|user)(?P<path>/(?:[^/]+/)*)?(?P<name>[^/]*)$")
#: Stages whose API admits the deploying account when ``api_principals`` is empty: a developer's own stage.
OPEN_ACCOUNT_STAGES = frozenset({"dev"})


def is_account(principal: str) -> bool:
    """An ``api_principals`` entry naming a whole account (12 digits), not one role or user."""
    return bool(_ACCOUNT.match(principal))


def api_principals(value: Any, stage: str, *, api_auth: str, tenant_map: Mapping[str, str]) -> tuple[str, ...]:
    """Account IDs and role or user ARNs, in the context's order (an account's ``:root`` ARN becomes its ID)."""
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of account IDs and IAM role or user ARNs, got {value!r}")
    principals = []
    for entry in value:
        match = _IAM_ARN.match(entry)
        if is_account(entry) or (match and match["kind"] == "root" and not match["path"]):
            principals.append(match["account"] if match else entry)
        elif match and match["kind"] != "root" and match["name"]:
            principals.append(entry)
        else:
            raise ValueError(f"{entry!r} is neither an account ID (12 digits) nor an IAM role or user "
                              f"ARN (arn:aws:iam::123456789012:role/<name>; a role, not a session of it)")
    principals = list(dict.fromkeys(principals))
    if api_auth != "iam":
        if principals:
            raise ValueError("with api_auth cognito the user pool admits the tenants (an "
                              "administrator creates each user); drop api_principals or use api_auth iam")
        return ()
    if not principals and stage not in OPEN_ACCOUNT_STAGES:
        raise ValueError(f"stage {stage} would admit every principal of its account as a tenant; "
                          f"list the accounts or roles that may call its API in stages.{stage}.api_principals in "
                          f"cdk.json (e.g. [\"arn:aws:iam::123456789012:role/payments-ci\"], or the account ID to "
                          f"admit all of its principals); docs/deploy.md, 'Admitting tenants'")
    if principals:
        for mapped in tenant_map:
            if not _admits(principals, mapped):
                raise ValueError(f"tenant_map maps {mapped!r}, which api_principals does not admit "
                                  f"(the API would refuse it); add it, or its account, to api_principals")
    return tuple(principals)


def _admits(principals: Sequence[str], principal: str) -> bool:
    """Whether the allow-list admits a ``tenant_map`` key: its account, or the same role or user (a role's ARN in
    ``tenant_map`` has no path, as ``jobrunner.api.tenancy`` names it); a key that is no IAM ARN is not checked."""
    account = re.match(r"^arn:[a-z-]+:(?:iam|sts)::([0-9]{12}):", principal)
    if account is None:
        return True
    if account[1] in principals:
        return True
    match = _IAM_ARN.match(principal)
    if match is None:
        return False
    wanted = (match["account"], match["kind"], match["name"])
    return any((m := _IAM_ARN.match(p)) is not None and (m["account"], m["kind"], m["name"]) == wanted
               for p in principals)


def _tenant_of_principal(principal: str, tenant_map: dict[str, str]) -> str:
    """The tenant an ``api_principals`` ARN acts as: a role by its ARN without path (as ``jobrunner.api.tenancy``
    names it), then mapped."""
    match = _IAM_ARN.match(principal)
    if match and match["kind"] == "role":
        principal = f"arn:{match['partition']}:iam::{match['account']}:role/{match['name']}"
    return tenant_map.get(principal, principal)


def tenant_spread(config: Admission) -> str | None:
    """Why the stage admits more than one tenant, or None when it admits one (or only dev's own account)."""
    if config.api_auth == "cognito":
        return "api_auth cognito: every user of the pool is a tenant"
    accounts = [p for p in config.api_principals if is_account(p)]
    if accounts:
        return f"api_principals admits account {accounts[0]}, each of whose roles and users is a tenant"
    tenant_map = dict(config.tenant_map)
    named = {_tenant_of_principal(p, tenant_map) for p in config.api_principals}
    named |= set(tenant_map.values()) | (set(config.tenant_limits) - {"*"}) | set(config.operators)
    if len(named) > 1:
        return f"api_principals, tenant_map, tenant_limits and operators name {len(named)} tenants"
    return None


def refuse_shared_topics(config: Admission) -> None:
    """A stage of several tenants deploys with per-tenant topics, or says it accepts shared ones."""
    spread = tenant_spread(config)
    if spread is None or config.tenant_topics or config.shared_worker_topics:
        return
    raise Refusal("tenant_topics", f"stage {config.stage} admits more than one tenant ({spread}), and with "
                      f"tenant_topics empty every tenant's executions (payloads and result tokens) go to the shared "
                      f"jobs topic, which any holder of WorkerPolicy reads. Give the tenants topics of their own in "
                      f"stages.{config.stage}.tenant_topics in cdk.json (each named tenant gets its own worker "
                      f"policy), or set stages.{config.stage}.shared_worker_topics to true to accept shared topics "
                      f"(docs/deploy.md, 'Admitting tenants')")
