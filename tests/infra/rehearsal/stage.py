"""The stack's AWS resources that moto emulates, stood up in moto (in-process) from the synthesized template, and
each function's role with exactly its template policies, so that the functions' code runs under those.

What is stood up: every DynamoDB table (named by its logical id, keys as the template declares them), every
Secrets Manager secret, the five functions (the scan is the one invoked) and their roles, each holding its
template's inline policies, resolved to these resources' names and ARNs. ``acting_as(unit)`` puts that role's
credentials where a Lambda function finds them (the environment) and turns IAM enforcement on; every request
is then decided by ``policy.decide`` (moto's check, which knows no resource ARNs, is replaced) and recorded.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3

from jobrunner.config import Settings
from jobrunner.wiring import Container
from tests.infra.rehearsal import policy
from tests.infra.rehearsal.template import (
    ACCOUNT,
    REGION,
    clusters,
    environment,
    function_ids,
    role_policies,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pytest

    from jobrunner.ports import CalendarStore, ChangeLog, Clock, Publisher, Stores

_CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_TRUST = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"},
    {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]})


@dataclass(frozen=True)
class Decision:
    """One authorization a function's request needed, and what the role's policies answered."""

    unit: str
    authorization: policy.Authorization
    allowed: bool

    def __str__(self) -> str:
        verdict = "allowed" if self.allowed else "DENIED"
        return f"{self.unit}: {verdict} {self.authorization.action} on {self.authorization.resource}"


class Stage:
    def __init__(self, template: dict[str, Any]) -> None:
        self.template = template
        self.physical = clusters(template)
        self.decisions: list[Decision] = []
        self.functions = function_ids(template)
        self.hash_keys: dict[str, str] = {}
        self._credentials: dict[str, dict[str, str]] = {}
        self._unit_of_role: dict[str, str] = {}

    def stand_up(self) -> None:
        """Create the resources and roles (with IAM enforcement off, as CloudFormation would)."""
        resources = self.template["Resources"]
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        for logical_id, resource in resources.items():
            properties = resource.get("Properties", {})
            if resource["Type"] == "AWS::DynamoDB::Table":
                dynamodb.create_table(TableName=logical_id, KeySchema=properties["KeySchema"],
                                      AttributeDefinitions=properties["AttributeDefinitions"],
                                      BillingMode="PAY_PER_REQUEST")
                self._name(logical_id, logical_id, f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{logical_id}")
                (hash_key,) = [k["AttributeName"] for k in properties["KeySchema"] if k["KeyType"] == "HASH"]
                self.hash_keys[logical_id] = hash_key
            elif resource["Type"] == "AWS::SecretsManager::Secret":
                arn = boto3.client("secretsmanager", region_name=REGION).create_secret(
                    Name=logical_id, SecretString=f"rehearsal-key-of-{logical_id}")["ARN"]
                self._name(logical_id, arn, arn)
        iam, lambda_ = boto3.client("iam", region_name=REGION), boto3.client("lambda", region_name=REGION)
        for unit, (function_id, role_id) in self.functions.items():
            role = iam.create_role(RoleName=role_id, AssumeRolePolicyDocument=_TRUST)["Role"]
            self._name(role_id, role_id, role["Arn"])
            self._unit_of_role[role_id] = unit
            name = resources[function_id]["Properties"].get("FunctionName", function_id)
            function = lambda_.create_function(FunctionName=name, Runtime="python3.13", Role=role["Arn"],
                                               Handler="handler.handler", Code={"ZipFile": _code()})
            self._name(function_id, name, function["FunctionArn"])
        sts = boto3.client("sts", region_name=REGION)
        for unit, (_function_id, role_id) in self.functions.items():
            for policy_id, document in role_policies(self.template, role_id, self.physical).items():
                iam.put_role_policy(RoleName=role_id, PolicyName=policy_id, PolicyDocument=json.dumps(document))
            answer = sts.assume_role(RoleArn=self.physical.attributes[(role_id, "Arn")], RoleSessionName=unit)
            credentials = answer["Credentials"]
            self._credentials[unit] = {"AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
                                       "AWS_SECRET_ACCESS_KEY": credentials["SecretAccessKey"],
                                       "AWS_SESSION_TOKEN": credentials["SessionToken"]}

    def _name(self, logical_id: str, ref: str, arn: str) -> None:
        self.physical.refs[logical_id] = ref
        self.physical.attributes[(logical_id, "Arn")] = arn

    def enforce(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Decide every authenticated request with ``policy.decide`` on the caller's policies, as held by moto."""
        from moto.iam import access_control

        stage = self

        def check_action_permitted(request: Any, resource: str) -> None:
            if request._action == "sts:GetCallerIdentity":
                return
            service, operation = request._action.split(":", 1)
            statements = [s for held in request._access_key.collect_policies()
                          for s in access_control.IAMPolicy(held)._policy_json["Statement"]]
            received = policy.Request(service=service, operation=operation, region=request._region,
                                      account=request.account_id, path=request._path, body=request._body or b"")
            unit = stage._unit_of_role[request._access_key.arn.split("/")[1]]
            for authorization in policy.authorizations(received, stage.hash_key_of):
                allowed = policy.decide(authorization, statements)
                stage.decisions.append(Decision(unit, authorization, allowed))
                if not allowed:
                    request._raise_access_denied()

        monkeypatch.setattr(access_control.IAMRequestBase, "check_action_permitted", check_action_permitted)

    def hash_key_of(self, table: str) -> str:
        return self.hash_keys[table]

    @contextmanager
    def acting_as(self, unit: str) -> Iterator[None]:
        """Run as the function ``unit``: its role's credentials in the environment (as Lambda puts them), and
        every request checked against its policies."""
        from moto.core.authorization import enable_iam_authentication

        saved = {name: os.environ.get(name) for name in _CREDENTIAL_VARIABLES}
        os.environ.update(self._credentials[unit])
        boto3.DEFAULT_SESSION = None  # its credentials were resolved once, from the environment before
        try:
            with enable_iam_authentication():
                yield
        finally:
            boto3.DEFAULT_SESSION = None
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def settings(self, unit: str) -> Settings:
        """The function's settings, from its environment in the template (and the region Lambda sets)."""
        function_id, _role_id = self.functions[unit]
        return Settings.from_env({**environment(self.template, function_id, self.physical), "AWS_REGION": REGION})

    def container(self, unit: str, *, store: Stores, publisher: Publisher, clock: Clock, changes: ChangeLog,
                  calendars: CalendarStore) -> Container:
        """The function's container: its own DynamoDB, Lambda and Secrets Manager clients (built on first use,
        so use it inside ``acting_as(unit)``), the shared memory stand-ins for Cassandra and Kafka."""
        return Container(self.settings(unit), store=store, publisher=publisher, clock=clock, changes=changes,
                         calendars=calendars)

    def table(self, prefix: str) -> str:
        (name,) = [n for n in self.hash_keys if n.startswith(prefix)]
        return name

    def item(self, prefix: str, key: dict[str, Any]) -> dict[str, Any]:
        """An item of the table whose logical id starts with ``prefix``, read with enforcement off."""
        answer = boto3.client("dynamodb", region_name=REGION).get_item(TableName=self.table(prefix), Key=key,
                                                                       ConsistentRead=True)
        item: dict[str, Any] = answer.get("Item", {})
        return item

    def secret_value(self, prefix: str) -> str:
        """The value of the secret whose logical id starts with ``prefix``, read with enforcement off."""
        answer = boto3.client("secretsmanager", region_name=REGION).get_secret_value(SecretId=self.arn(prefix))
        return str(answer["SecretString"])

    def denied(self) -> list[str]:
        return [str(d) for d in self.decisions if not d.allowed]

    def allowed(self, unit: str) -> set[tuple[str, str]]:
        """(action, resource) of every authorization the function was granted."""
        return {(d.authorization.action, d.authorization.resource) for d in self.decisions
                if d.unit == unit and d.allowed}

    def arn(self, prefix: str) -> str:
        (arn,) = [a for (logical_id, attribute), a in self.physical.attributes.items()
                  if logical_id.startswith(prefix) and attribute == "Arn"]
        return arn


def _code() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    return buffer.getvalue()
