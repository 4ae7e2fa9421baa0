"""The synthesized template, read as the rehearsal needs it: each function's role policy and environment, with
CloudFormation's references resolved to the names and ARNs of the resources the rehearsal stands up."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"
#: The functions, by the unit names their logical ids start with.
UNITS = ("Api", "Tick", "Scan", "Results", "Reconcile")
#: An MSK cluster's ARN has a generated id after its name; the topic and group ARNs repeat it.
CLUSTER_ID = "0b1d2c3e-4f50-6172-8394-a5b6c7d8e9f0-s1"


@dataclass
class Physical:
    """What a logical id stands for once deployed: its ``Ref`` and its attributes (``Fn::GetAtt``)."""

    refs: dict[str, str] = field(default_factory=dict)
    attributes: dict[tuple[str, str], str] = field(default_factory=dict)


def resolve(value: Any, physical: Physical) -> Any:
    """``value`` with every intrinsic function resolved (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Select``,
    ``Fn::Split``, ``Fn::Sub`` without variables); a reference to a resource the rehearsal did not stand up
    resolves to a name that says so, which no grant of the rehearsal's resources matches."""
    if isinstance(value, list):
        return [resolve(v, physical) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1 or not next(iter(value)).startswith(("Ref", "Fn::")):
        return {k: resolve(v, physical) for k, v in value.items()}
    ((function, argument),) = value.items()
    if function == "Ref":
        pseudo = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
                  "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "rehearsal"}
        return pseudo.get(argument) or physical.refs.get(argument, f"unresolved-ref-{argument}")
    if function == "Fn::GetAtt":
        logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
        unresolved = (f"arn:aws:unresolved:{REGION}:{ACCOUNT}:{logical_id}" if attribute == "Arn"
                      else f"unresolved-{logical_id}.{attribute}")
        return physical.attributes.get((logical_id, attribute), unresolved)
    if function == "Fn::Join":
        separator, parts = argument
        return separator.join(str(resolve(p, physical)) for p in parts)
    if function == "Fn::Select":
        index, items = argument
        return resolve(items, physical)[int(index)]
    if function == "Fn::Split":
        separator, text = argument
        return str(resolve(text, physical)).split(separator)
    if function == "Fn::Sub" and isinstance(argument, str):
        text = argument
        for name in ("AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::URLSuffix"):
            text = text.replace("${" + name + "}", str(resolve({"Ref": name}, physical)))
        return text
    raise ValueError(f"the rehearsal cannot resolve {function}")


def clusters(template: dict[str, Any]) -> Physical:
    """The MSK clusters, named as MSK names them (moto has no Kafka data plane to stand them up in)."""
    physical = Physical()
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] in ("AWS::MSK::ServerlessCluster", "AWS::MSK::Cluster"):
            arn = f"arn:aws:kafka:{REGION}:{ACCOUNT}:cluster/{resource['Properties']['ClusterName']}/{CLUSTER_ID}"
            physical.refs[logical_id] = arn
            physical.attributes[(logical_id, "Arn")] = arn
    return physical


def function_ids(template: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each unit's (function logical id, role logical id)."""
    out = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Lambda::Function" and "HandlerFunction" in logical_id:
            unit = logical_id.split("Handler")[0]
            out[unit] = (logical_id, resource["Properties"]["Role"]["Fn::GetAtt"][0])
    return out


def role_policies(template: dict[str, Any], role_id: str, physical: Physical) -> dict[str, dict[str, Any]]:
    """The role's policies, by name, resolved: its own inline ones (``Policies``: the runtime's logs and network
    interfaces) and the ``AWS::IAM::Policy`` resources attached to it (the stack's grants)."""
    properties = template["Resources"][role_id]["Properties"]
    out = {f"{role_id}-{p['PolicyName']}": resolve(copy.deepcopy(p["PolicyDocument"]), physical)
           for p in properties.get("Policies", [])}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"]["Roles"]:
            out[logical_id] = resolve(copy.deepcopy(resource["Properties"]["PolicyDocument"]), physical)
    managed = properties.get("ManagedPolicyArns")
    if managed:  # none today: a managed policy would need its statements here too
        raise ValueError(f"role {role_id} has managed policies {managed}: the rehearsal does not read them")
    return out


def statements(policies: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for document in policies.values() for s in document["Statement"]]


def environment(template: dict[str, Any], function_id: str, physical: Physical) -> dict[str, str]:
    variables = template["Resources"][function_id]["Properties"]["Environment"]["Variables"]
    return {name: str(resolve(value, physical)) for name, value in variables.items()}
