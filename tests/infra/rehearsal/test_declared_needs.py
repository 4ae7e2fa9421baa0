"""What the functions need from the services moto does not emulate (Amazon Keyspaces, MSK with IAM auth), declared
here and checked against each role's statements in the template, as the rehearsal's IAM decides them.

Keyspaces: the statements an adapter runs are its module's CQL (``SELECT`` needs ``cassandra:Select``; ``INSERT``,
``UPDATE``, ``DELETE`` need ``cassandra:Modify``, and a conditional one ``Select`` too), so they are read from the
adapters, not written down again; a function that uses its store in part (the reconciler) needs the statements the
store methods its service calls can reach. MSK: what the Kafka publisher does (an idempotent producer) on the
topics each function publishes to, and what the results function's event source mapping does with its role.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any

import pytest

from jobrunner.config import Settings
from tests.infra.rehearsal.policy import Authorization, decide
from tests.infra.rehearsal.template import (
    ACCOUNT,
    REGION,
    clusters,
    environment,
    function_ids,
    role_policies,
    statements,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.infra.conftest import Synthesized

ROOT = Path(__file__).resolve().parents[3]
STORE, CHANGES, CALENDARS = ("jobrunner.adapters.stores.cassandra", "jobrunner.adapters.stores.changes",
                             "jobrunner.adapters.stores.calendars")
#: The history table's adapter, which the store composes and hands its history methods on to, by the same names.
HISTORY = "jobrunner.adapters.stores.history"
PUBLISHER = "jobrunner.adapters.publishers.kafka"
#: The adapters that talk to Keyspaces, by module: the class whose methods run the module's CQL.
KEYSPACES_ADAPTERS = {STORE: "CassandraJobStore", HISTORY: "CassandraHistory", CHANGES: "CassandraChangeLog",
                      CALENDARS: "CassandraCalendarStore"}
#: Modules that import a driver but run no statement and send nothing themselves: how a function connects (the
#: session, Keyspaces' SigV4 and TLS), the driver's rows, the prepared statements and batches the adapters send
#: their own statements through (``stores.driver``), and the topic creation of the local stack (in AWS, the
#: topic admin function's, under a role of its own).
DRIVER_HELPERS = {"jobrunner.adapters.stores.session", "jobrunner.adapters.stores.keyspaces",
                  "jobrunner.adapters.stores.rows", "jobrunner.adapters.stores.driver",
                  "jobrunner.adapters.publishers.topics"}
#: What connecting takes: the driver reads the system keyspaces (the peers, the schema) on every connection.
CONNECT_TABLES = (("system", "local"), ("system", "peers"), ("system_schema", "tables"), ("system_schema", "keyspaces"))
#: The adapters of services moto does not emulate that each function's container builds. The session's adapters
#: (change log, calendars) come with the store: ``Container.changes`` and ``Container.calendars``.
FUNCTION_ADAPTERS = {
    "Api": {STORE, HISTORY, CHANGES, CALENDARS},
    "Scan": {STORE, HISTORY, CHANGES, CALENDARS, PUBLISHER},
    "Results": {STORE, HISTORY, CHANGES, CALENDARS, PUBLISHER},
    "Tick": set(),
    "Reconcile": {STORE, HISTORY, CHANGES},
}
#: Functions that use their store in part: the service module whose calls on the store and the change log say which
#: methods (``ReconcileService``: ``self._store``, ``service.store``, ``store``; ``self._changes``).
PARTIAL_USERS = {"Reconcile": "jobrunner.services.reconcile.service"}
#: What an idempotent producer (the publisher: acks=all, enable_idempotence) does with IAM auth.
PRODUCE_CLUSTER = ("kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently")
PRODUCE_TOPIC = ("kafka-cluster:DescribeTopic", "kafka-cluster:WriteData")
#: What Lambda's MSK event source mapping does with the results function's role (AWS's documented list).
TRIGGER_CLUSTER = ("kafka-cluster:Connect", "kafka-cluster:DescribeClusterDynamicConfiguration",
                   "kafka:DescribeClusterV2", "kafka:GetBootstrapBrokers")
TRIGGER_TOPIC = ("kafka-cluster:DescribeTopic", "kafka-cluster:ReadData")
TRIGGER_GROUP = ("kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup")
_CQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE)\b.*?\b(?:FROM|INTO|UPDATE)\s+(\w+)", re.IGNORECASE | re.DOTALL)
_DRIVERS = re.compile(r"^\s*(?:from|import)\s+(cassandra|kafka|aws_msk_iam_sasl_signer|cassandra_sigv4)\b", re.M)


def cql_needs(cql: str) -> set[tuple[str, str]]:
    """(action, table) a statement needs."""
    match = _CQL.match(cql)
    assert match, cql
    verb, table = match.group(1).upper(), match.group(2)
    needs = {("cassandra:Select" if verb == "SELECT" else "cassandra:Modify", table)}
    if verb != "SELECT" and re.search(r"\bIF\b", cql):  # a lightweight transaction reads as it writes
        needs.add(("cassandra:Select", table))
    return needs


def reachable_cql(cls: type, method: str) -> set[str]:
    """The module-level CQL statements ``cls.method`` can run: the names its code (and the methods of ``cls`` it
    calls, transitively) refers to that are statements of its module."""
    module = sys.modules[cls.__module__]
    statements_of_module = {name: value for name, value in vars(module).items()
                            if isinstance(value, str) and _CQL.match(value)}
    found: set[str] = set()
    seen: set[str] = set()
    pending = [method]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        function = inspect.getattr_static(cls, name, None)
        function = getattr(function, "__func__", function)
        if not isinstance(function, FunctionType):
            continue
        for referred in _names(function.__code__):
            if referred in statements_of_module:
                found.add(statements_of_module[referred])
            elif inspect.getattr_static(cls, referred, None) is not None:
                pending.append(referred)
    return found


def _names(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _names(constant)
    return names


def all_cql(module_name: str) -> set[str]:
    module = importlib.import_module(module_name)
    return {value for value in vars(module).values() if isinstance(value, str) and _CQL.match(value)}


def keyspaces_needs(unit: str) -> set[tuple[str, str]]:
    """(action, table) the function's Keyspaces adapters need, as it uses them."""
    adapters = FUNCTION_ADAPTERS[unit] & set(KEYSPACES_ADAPTERS)
    statements_run: set[str] = set()
    if unit in PARTIAL_USERS:
        source = inspect.getsource(importlib.import_module(PARTIAL_USERS[unit]))
        calls = {STORE: set(re.findall(r"(?:self\._store|service\.store|\bstore)\.(\w+)\(", source)),
                 CHANGES: set(re.findall(r"self\._changes\.(\w+)\(", source))}
        calls[HISTORY] = calls[STORE]  # the store's history methods, handed on under their names
        for module_name in adapters:
            cls = getattr(importlib.import_module(module_name), KEYSPACES_ADAPTERS[module_name])
            unknown = sorted(m for m in calls[module_name] if not hasattr(cls, m)) if module_name != HISTORY else []
            assert not unknown, f"{unit} calls {unknown}, which {cls.__name__} does not have"
            for method in calls[module_name]:
                statements_run |= reachable_cql(cls, method)
    else:
        for module_name in adapters:
            statements_run |= all_cql(module_name)
    return {need for cql in statements_run for need in cql_needs(cql)}


def role_statements(app: Synthesized, unit: str) -> list[dict[str, Any]]:
    _function_id, role_id = function_ids(app.template)[unit]
    return statements(role_policies(app.template, role_id, clusters(app.template)))


def settings_of(app: Synthesized, unit: str) -> Settings:
    function_id, _role_id = function_ids(app.template)[unit]
    return Settings.from_env({**environment(app.template, function_id, clusters(app.template)), "AWS_REGION": REGION})


def missing(app: Synthesized, unit: str, needs: set[tuple[str, str]]) -> list[str]:
    held = role_statements(app, unit)
    return sorted(f"{action} on {resource}" for action, resource in needs
                  if not decide(Authorization(action, resource), held))


@pytest.mark.parametrize("unit", sorted(FUNCTION_ADAPTERS))
def test_each_function_may_run_the_cql_its_adapters_run(default_app: Synthesized, unit: str) -> None:
    settings = settings_of(default_app, unit)
    prefix = f"arn:aws:cassandra:{REGION}:{ACCOUNT}:/keyspace"
    needs = {(action, f"{prefix}/{settings.keyspace}/table/{table}") for action, table in keyspaces_needs(unit)}
    if FUNCTION_ADAPTERS[unit] & set(KEYSPACES_ADAPTERS):
        needs |= {("cassandra:Select", f"{prefix}/{keyspace}/table/{table}") for keyspace, table in CONNECT_TABLES}

    assert missing(default_app, unit, needs) == []
    if unit == "Reconcile":  # it runs part of the store only, and is granted no more (test_stack holds that)
        assert ("cassandra:Modify", "job_table_v2") not in keyspaces_needs(unit)
        assert ("cassandra:Modify", "task_schedule_v2") in keyspaces_needs(unit)


@pytest.mark.parametrize("variant", ["default", "cognito-x86"])
def test_the_publishers_may_write_every_topic_they_publish_to(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    app = synth(variant)
    (cluster,) = clusters(app.template).refs.values()
    name, cluster_id = cluster.split(":cluster/")[1].split("/")
    for unit in ("Scan", "Results"):
        settings = settings_of(app, unit)
        grants = settings.topic_grants
        # the scan publishes executions to any topic a job may name, and dead letters; the results function dead
        # letters only (retries are rows the scan publishes)
        topics = ({grants.default, *grants.allowed, *(t for ts in grants.per_tenant.values() for t in ts)}
                  if unit == "Scan" else set()) | {settings.dead_letter_topic}
        needs = {(action, cluster) for action in PRODUCE_CLUSTER}
        needs |= {(action, f"arn:aws:kafka:{REGION}:{ACCOUNT}:topic/{name}/{cluster_id}/{topic}")
                  for action in PRODUCE_TOPIC for topic in topics}
        assert missing(app, unit, needs) == [], unit


def test_the_results_trigger_may_read_its_topic_as_its_group(default_app: Synthesized) -> None:
    (cluster,) = clusters(default_app.template).refs.values()
    name, cluster_id = cluster.split(":cluster/")[1].split("/")
    (mapping,) = default_app.resources("AWS::Lambda::EventSourceMapping").values()
    properties = mapping["Properties"]
    (topic,) = properties["Topics"]
    group = properties["AmazonManagedKafkaEventSourceConfig"]["ConsumerGroupId"]
    base = f"arn:aws:kafka:{REGION}:{ACCOUNT}"
    needs = {(action, cluster) for action in TRIGGER_CLUSTER}
    needs |= {(action, f"{base}:topic/{name}/{cluster_id}/{topic}") for action in TRIGGER_TOPIC}
    needs |= {(action, f"{base}:group/{name}/{cluster_id}/{group}") for action in TRIGGER_GROUP}

    assert missing(default_app, "Results", needs) == []


def test_the_declared_adapters_are_every_one_that_talks_to_keyspaces_or_kafka() -> None:
    # Every adapter module that imports a Cassandra or Kafka driver (or their AWS auth) is declared above
    adapters = ROOT / "layers" / "jobrunner" / "adapters"
    talking = {".".join(path.relative_to(ROOT / "layers").with_suffix("").parts) for path in adapters.rglob("*.py")
               if _DRIVERS.search(path.read_text())}
    assert talking <= set(KEYSPACES_ADAPTERS) | {PUBLISHER} | DRIVER_HELPERS
    # and each declared one runs statements this test can read
    assert all(all_cql(module) for module in KEYSPACES_ADAPTERS)


@pytest.mark.parametrize("unit", sorted(FUNCTION_ADAPTERS))
def test_the_adapters_declared_for_a_function_are_those_its_handler_loads(unit: str) -> None:
    """A handler loads the drivers it uses at init (``wiring.load_adapters``; ``tests/unit/jobrunner/test_wiring.py``
    checks it loads no other); its container builds the change log and the calendars on the store's session."""
    handler = ast.parse((ROOT / "functions" / unit.lower() / "handler.py").read_text())
    calls = [node for node in ast.walk(handler) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "load_adapters"]
    loads = {keyword.arg for call in calls for keyword in call.keywords
             if isinstance(keyword.value, ast.Constant) and keyword.value.value is True}
    declared = FUNCTION_ADAPTERS[unit]

    assert (STORE in declared, PUBLISHER in declared) == ("store" in loads, "publisher" in loads)
    assert (CHANGES in declared) == (STORE in declared)  # Container.changes: on the store's session
    assert (HISTORY in declared) == (STORE in declared)  # composed by the store
    modules = importlib.import_module("jobrunner.wiring").ADAPTER_MODULES  # what load_adapters imports
    assert (modules["store"], modules["publisher"]) == (STORE, PUBLISHER)


@pytest.mark.parametrize("variant", ["targets", "targets-aws"])
def test_the_delivery_trigger_reads_its_topic_and_the_function_reports_to_job_results(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    # Given a stage with targets: the delivery function, whose MSK trigger reads job-deliveries as its group
    app = synth(variant)
    (cluster,) = clusters(app.template).refs.values()
    name, cluster_id = cluster.split(":cluster/")[1].split("/")
    (mapping,) = [m["Properties"] for m in app.resources("AWS::Lambda::EventSourceMapping").values()
                  if m["Properties"]["FunctionName"]["Ref"].startswith("DeliveryHandlerFunction")]
    (topic,) = mapping["Topics"]
    group = mapping["AmazonManagedKafkaEventSourceConfig"]["ConsumerGroupId"]
    settings = settings_of(app, "Delivery")
    base = f"arn:aws:kafka:{REGION}:{ACCOUNT}"
    assert topic == settings.delivery_topic
    needs = {(action, cluster) for action in (*TRIGGER_CLUSTER, *PRODUCE_CLUSTER)}
    needs |= {(action, f"{base}:topic/{name}/{cluster_id}/{topic}") for action in TRIGGER_TOPIC}
    needs |= {(action, f"{base}:group/{name}/{cluster_id}/{group}") for action in TRIGGER_GROUP}
    # And the function publishes each outcome to the results topic, as a worker does
    needs |= {(action, f"{base}:topic/{name}/{cluster_id}/{settings.results_topic}") for action in PRODUCE_TOPIC}
    assert missing(app, "Delivery", needs) == []
    # But it may write no topic a job names, nor the dead letters
    for other in (*settings.allowed_topics, settings.dead_letter_topic):
        assert missing(app, "Delivery", {("kafka-cluster:WriteData",
                                          f"{base}:topic/{name}/{cluster_id}/{other}")}) != [], other
    # And the scan may publish the executions of jobs with a target to the delivery topic
    assert missing(app, "Scan", {(action, f"{base}:topic/{name}/{cluster_id}/{topic}")
                                 for action in PRODUCE_TOPIC}) == []


def test_the_delivery_may_use_the_tenants_webhook_secrets_of_its_stage_only(
    synth: Callable[[str], Synthesized],
) -> None:
    app = synth("targets")
    settings = settings_of(app, "Delivery")
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{settings.webhook_secret_prefix}payments-AbCdEf"
    other_stage = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:jobrunner/prod/webhooks/payments-AbCdEf"

    assert missing(app, "Delivery", {(action, secret) for action in (
        "secretsmanager:GetSecretValue", "secretsmanager:CreateSecret", "secretsmanager:PutSecretValue")}) == []
    assert missing(app, "Delivery", {("secretsmanager:GetSecretValue", other_stage)}) != []
    assert missing(app, "Delivery", {("secretsmanager:DeleteSecret", secret)}) != []


def test_the_api_may_read_and_rotate_the_tenants_webhook_secrets_of_its_stage_only(
    synth: Callable[[str], Synthesized],
) -> None:
    app = synth("targets")
    settings = settings_of(app, "Api")
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{settings.webhook_secret_prefix}payments-AbCdEf"
    other_stage = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:jobrunner/prod/webhooks/payments-AbCdEf"

    # The API reads a tenant's secrets, creates them on a first read and writes a rotation and its end
    assert missing(app, "Api", {(action, secret) for action in (
        "secretsmanager:GetSecretValue", "secretsmanager:CreateSecret", "secretsmanager:PutSecretValue")}) == []
    # and nothing more: not another stage's, not a delete, a policy or a listing of every secret
    assert missing(app, "Api", {("secretsmanager:GetSecretValue", other_stage)}) != []
    for action in ("secretsmanager:DeleteSecret", "secretsmanager:PutResourcePolicy",
                   "secretsmanager:UpdateSecretVersionStage", "secretsmanager:RotateSecret"):
        assert missing(app, "Api", {(action, secret)}) != [], action
    # and a stage without targets grants the API no webhook secret at all
    assert missing(synth("default"), "Api", {("secretsmanager:GetSecretValue", secret)}) != []
