"""What AWS decides for a request, for the requests the functions make to services moto emulates.

moto's own IAM enforcement checks only the action's name, against the resource ``*`` (so a policy that names
a table's ARN denies everything), ignores ``dynamodb:*`` condition keys, and names two actions as AWS does
not (``lambda:Invoke`` for ``lambda:InvokeFunction``; ``dynamodb:TransactWriteItems``, which IAM checks item by
item). ``authorizations`` turns one request into the authorizations AWS makes (action, resource ARN, condition
keys) and ``decide`` evaluates them against the caller's policies; ``tests.infra.rehearsal.moto_iam`` puts this
in place of moto's check, after moto has checked the signature and found the caller's policies.

A secret named rather than given by ARN (a tenant's webhook secrets) is checked as ``<name>-<SECRET_SUFFIX>``,
the ARN Secrets Manager gives it; an SQS send, on the queue its URL names.

Fails closed: a request it cannot translate is evaluated as ``<service>:<operation>`` on ``*``; a condition
operator it does not know raises. The attributes a DynamoDB request touches are counted generously (the key,
and every name in its update, condition and projection expressions; a read with no projection counts as
reading everything), so a grant that passes here is not narrower than AWS needs.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

#: What a read with no projection counts as reading (no attribute list allows it).
ALL_ATTRIBUTES = "<every attribute>"
_KEYWORDS = {"SET", "ADD", "REMOVE", "DELETE", "AND", "OR", "NOT", "BETWEEN", "IN"}
_PATH = re.compile(r"(?<![\w.#:])(#?[A-Za-z_]\w*)((?:\.#?[A-Za-z_]\w*|\[\d+\])*)(\s*\()?")
#: DynamoDB operations whose item is one key of one table, as IAM names the action.
_SINGLE_ITEM = {"GetItem", "PutItem", "UpdateItem", "DeleteItem"}
#: Secrets Manager operations on one secret, by ARN or by name.
_SECRET_OPERATIONS = {"GetSecretValue", "DescribeSecret", "CreateSecret", "PutSecretValue"}
#: What stands for the six random characters Secrets Manager appends to a secret's name in its ARN.
SECRET_SUFFIX = "AbCdEf"
_TRANSACT_ACTIONS = {"Get": "GetItem", "Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                     "ConditionCheck": "ConditionCheckItem"}


@dataclass(frozen=True)
class Authorization:
    """One question IAM answers for a request: may the caller do ``action`` on ``resource``, given ``context``."""

    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    """A signed request as moto received it."""

    service: str
    operation: str
    region: str
    account: str
    path: str
    body: bytes


def authorizations(request: Request, hash_key_of: Callable[[str], str]) -> list[Authorization]:
    """The authorizations AWS makes for ``request`` (one per item of a transaction, one per table of a batch)."""
    if request.service == "dynamodb":
        return _dynamodb(request, json.loads(request.body or b"{}"), hash_key_of)
    if request.service == "lambda" and request.operation == "Invoke":
        name = unquote(request.path.split("/functions/", 1)[1].split("/", 1)[0])
        arn = name if name.startswith("arn:") else f"arn:aws:lambda:{request.region}:{request.account}:function:{name}"
        return [Authorization("lambda:InvokeFunction", arn)]
    if request.service == "secretsmanager" and request.operation in _SECRET_OPERATIONS:
        body = json.loads(request.body)
        secret = str(body.get("SecretId", body.get("Name")))
        if not secret.startswith("arn:"):  # by name (the webhook secrets): IAM checks the ARN, whose suffix is random
            secret = f"arn:aws:secretsmanager:{request.region}:{request.account}:secret:{secret}-{SECRET_SUFFIX}"
        return [Authorization(f"secretsmanager:{request.operation}", secret)]
    if request.service == "sqs" and request.operation == "SendMessage":
        *_, account, name = str(json.loads(request.body)["QueueUrl"]).split("/")
        return [Authorization("sqs:SendMessage", f"arn:aws:sqs:{request.region}:{account}:{name}")]
    return [Authorization(f"{request.service}:{request.operation}", "*")]


def _dynamodb(request: Request, body: dict[str, Any], hash_key_of: Callable[[str], str]) -> list[Authorization]:
    operation = request.operation
    if operation in _SINGLE_ITEM:
        keys = [body["Key"]] if "Key" in body else [body.get("Item", {})]
        return [_item(request, operation, body["TableName"], body, keys, hash_key_of)]
    if operation == "BatchGetItem":
        return [_item(request, operation, table, params, params["Keys"], hash_key_of)
                for table, params in body["RequestItems"].items()]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        out = []
        for entry in body["TransactItems"]:
            ((kind, params),) = entry.items()
            out.append(_item(request, _TRANSACT_ACTIONS[kind], params["TableName"], params, [params["Key"]],
                             hash_key_of))
        return out
    table = f"{_table_arn(request, body['TableName'])}" if "TableName" in body else "*"
    return [Authorization(f"dynamodb:{operation}", table)]


def _table_arn(request: Request, name: str) -> str:
    return f"arn:aws:dynamodb:{request.region}:{request.account}:table/{name}"


def _item(request: Request, action: str, table: str, params: dict[str, Any], keys: list[dict[str, Any]],
          hash_key_of: Callable[[str], str]) -> Authorization:
    """The authorization of one item's ``action``: on its table, with the attributes and leading keys it touches."""
    names = params.get("ExpressionAttributeNames", {})
    attributes = {name for key in keys for name in key}
    for expression in ("UpdateExpression", "ConditionExpression", "ProjectionExpression"):
        attributes |= expression_attributes(params.get(expression, ""), names)
    if action in ("GetItem", "BatchGetItem") and "ProjectionExpression" not in params:
        attributes.add(ALL_ATTRIBUTES)
    hash_key = hash_key_of(table)
    leading = {str(next(iter(value.values()))) for key in keys for name, value in key.items() if name == hash_key}
    context: dict[str, tuple[str, ...]] = {"dynamodb:Attributes": tuple(sorted(attributes)),
                                           "dynamodb:LeadingKeys": tuple(sorted(leading))}
    for key in ("ReturnValues", "Select"):
        if key in params:
            context[f"dynamodb:{key}"] = (str(params[key]),)
    return Authorization(f"dynamodb:{action}", _table_arn(request, table), context)


def expression_attributes(expression: str, names: Mapping[str, str]) -> set[str]:
    """The top-level attribute names an update, condition or projection expression names."""
    found = set()
    for match in _PATH.finditer(expression):
        head, _path, call = match.groups()
        if call or head.upper() in _KEYWORDS:
            continue
        found.add(names[head] if head.startswith("#") else head)
    return found


def decide(authorization: Authorization, statements: Iterable[Mapping[str, Any]]) -> bool:
    """IAM's identity-policy decision: an explicit Deny wins, else some Allow must match."""
    allowed = False
    for statement in statements:
        if not _applies(statement, authorization):
            continue
        if statement["Effect"] == "Deny":
            return False
        allowed = True
    return allowed


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _applies(statement: Mapping[str, Any], authorization: Authorization) -> bool:
    def matches(patterns: str | list[str], value: str, *, case: bool) -> bool:
        return any(fnmatch.fnmatchcase(value if case else value.lower(), p if case else p.lower())
                   for p in _listed(patterns))

    if "Action" in statement:
        if not matches(statement["Action"], authorization.action, case=False):
            return False
    elif matches(statement["NotAction"], authorization.action, case=False):
        return False
    if "Resource" in statement:
        if not matches(statement["Resource"], authorization.resource, case=True):
            return False
    elif matches(statement["NotResource"], authorization.resource, case=True):
        return False
    return all(condition(operator, key, expected, authorization.context.get(key))
               for operator, keys in statement.get("Condition", {}).items() for key, expected in keys.items())


_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda actual, expected: actual == expected,
    "StringNotEquals": lambda actual, expected: actual != expected,
    "StringLike": lambda actual, expected: fnmatch.fnmatchcase(actual, expected),
    "StringNotLike": lambda actual, expected: not fnmatch.fnmatchcase(actual, expected),
}


def condition(operator: str, key: str, expected: str | list[str], actual: tuple[str, ...] | None) -> bool:
    """One condition of a statement: ``operator`` (with its set prefix and ``IfExists``) on the request's
    values of ``key`` (None: the request has no such key)."""
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    if name not in _OPERATORS:
        raise ValueError(f"the rehearsal cannot evaluate condition operator {operator!r} (on {key})")
    test = _OPERATORS[name]
    negated = name.startswith("StringNot")
    values = _listed(expected)

    def one(value: str) -> bool:
        hits = [test(value, e) for e in values]
        return all(hits) if negated else any(hits)

    if qualifier == "ForAllValues":
        return all(one(v) for v in actual or ())
    if qualifier == "ForAnyValue":
        return any(one(v) for v in actual or ())
    if qualifier:
        raise ValueError(f"unknown set operator {qualifier!r}")
    if actual is None:
        return if_exists
    return all(one(v) for v in actual)
