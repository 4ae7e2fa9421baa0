"""Network, checked: every function in the VPC reaches every service its code calls, proven from the template.

``infra.constructs.network.FUNCTION_CALLS`` declares what each function calls. Here, for each variant's
template: the declaration covers the AWS clients each function's wiring creates (its container built with the
function's own environment from the template), and for each function in the VPC and each service it calls, a
path exists: the service's interface endpoint (private DNS on: it is then the only way) whose group admits the
function's group on the port, a gateway endpoint in the route tables of the function's subnets, or a NAT route;
Kafka's IAM port open both ways between the function and the cluster; Keyspaces' port open to its endpoint. The
MSK trigger's pollers, which run with the cluster's group, are checked the same way. Issue #32: the wakes of scans
went to Lambda's endpoint, whose group admitted the pollers only, and were dropped.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import ipaddress
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from infra.constructs.network import FUNCTION_CALLS, INTERNET, KAFKA_IAM_PORT, POLLER_CALLS
from tests.infra.conftest import VARIANTS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from tests.infra.conftest import Synthesized

ROOT = Path(__file__).resolve().parents[2]
HTTPS = 443
#: Services reached through a gateway endpoint (route tables), not an interface endpoint (DNS and groups).
GATEWAY_SERVICES = {"dynamodb", "s3"}
#: The job runner's functions, whose container (``jobrunner.wiring``) creates their AWS clients.
JOBRUNNER_FUNCTIONS = ("api", "tick", "scan", "results", "reconcile")
#: Lambda sets it; the template does not.
REGION = "eu-west-1"


# The template, read ------------------------------------------------------------------------------------------


def function_name(logical_id: str) -> str | None:
    """The ``FUNCTION_CALLS`` name of a function of the template (None: not one of ours, e.g. CDK's own)."""
    if "HandlerFunction" in logical_id:
        return logical_id.split("HandlerFunction")[0].lower()
    if logical_id.startswith("StreamingTopicAdminFunction"):
        return "topic_admin"
    return None


def functions(app: Synthesized) -> dict[str, dict[str, Any]]:
    """Our functions' properties by name; CDK's own functions (custom resources) run outside the VPC."""
    out: dict[str, dict[str, Any]] = {}
    for logical_id, resource in app.resources("AWS::Lambda::Function").items():
        name = function_name(logical_id)
        if name is None:
            assert "VpcConfig" not in resource["Properties"], f"{logical_id}: in the VPC but not in FUNCTION_CALLS"
            continue
        out[name] = resource["Properties"]
    return out


def environment(function: dict[str, Any]) -> dict[str, str]:
    """A function's variables as Lambda gives them: values resolved at deploy time get a stand-in."""
    variables = function.get("Environment", {}).get("Variables", {})
    return {"AWS_REGION": REGION, **{name: value if isinstance(value, str) else f"deploy-time-{name.lower()}"
                                     for name, value in variables.items()}}


def _ref(value: Any) -> str:
    """A logical id from ``Ref`` or ``Fn::GetAtt``, or the literal value (an id given in the context)."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return json.dumps(value) if not isinstance(value, str) else value


@dataclass(frozen=True)
class Rule:
    protocol: str
    from_port: int
    to_port: int
    #: A group's logical id, ``cidr:<block>`` or ``prefix-list:<id>``.
    peer: str

    def covers(self, port: int) -> bool:
        return self.protocol == "-1" or (self.protocol in ("tcp", "6") and self.from_port <= port <= self.to_port)


def _rule(props: dict[str, Any], group_key: str) -> Rule:
    if group_key in props:
        peer = _ref(props[group_key])
    elif "DestinationPrefixListId" in props:
        peer = f"prefix-list:{_ref(props['DestinationPrefixListId'])}"
    else:
        peer = f"cidr:{_ref(props.get('CidrIp', props.get('CidrIpv6')))}"
    protocol = str(props["IpProtocol"])
    return Rule(protocol, int(props.get("FromPort", 0)), int(props.get("ToPort", 65535)), peer)


@dataclass
class Network:
    """The template's security groups, route tables, endpoints and VPCs, as the checks need them."""

    app: Synthesized
    ingress: dict[str, list[Rule]] = field(default_factory=dict)
    egress: dict[str, list[Rule]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for logical_id, group in self.app.resources("AWS::EC2::SecurityGroup").items():
            props = group["Properties"]
            self.ingress[logical_id] = [_rule(r, "SourceSecurityGroupId")
                                        for r in props.get("SecurityGroupIngress", [])]
            self.egress[logical_id] = [_rule(r, "DestinationSecurityGroupId")
                                       for r in props.get("SecurityGroupEgress", [])]
        for kind, rules, key in (("AWS::EC2::SecurityGroupIngress", self.ingress, "SourceSecurityGroupId"),
                                 ("AWS::EC2::SecurityGroupEgress", self.egress, "DestinationSecurityGroupId")):
            for resource in self.app.resources(kind).values():
                props = resource["Properties"]
                rules.setdefault(_ref(props["GroupId"]), []).append(_rule(props, key))

    @functools.cached_property
    def vpc_of_subnet(self) -> dict[str, str]:
        return {lid: _ref(s["Properties"]["VpcId"]) for lid, s in self.app.resources("AWS::EC2::Subnet").items()}

    @functools.cached_property
    def route_table_of_subnet(self) -> dict[str, str]:
        return {_ref(a["Properties"]["SubnetId"]): _ref(a["Properties"]["RouteTableId"])
                for a in self.app.resources("AWS::EC2::SubnetRouteTableAssociation").values()}

    def vpc_cidrs(self, vpc: str) -> set[str]:
        """The VPC's CIDR block, as a literal and as the template may refer to it."""
        props = self.app.template["Resources"][vpc]["Properties"]
        return {f"cidr:{props['CidrBlock']}", f"cidr:{json.dumps({'Fn::GetAtt': [vpc, 'CidrBlock']})}"}

    def resolves_privately(self, vpc: str) -> bool:
        """Private DNS names of interface endpoints resolve in the VPC only with both DNS attributes on."""
        props = self.app.template["Resources"][vpc]["Properties"]
        return bool(props.get("EnableDnsSupport", True)) and bool(props.get("EnableDnsHostnames", False))

    def endpoints(self, service: str, vpc: str) -> list[dict[str, Any]]:
        """The VPC's endpoints of ``service`` (the last part of the service name)."""
        return [e["Properties"] for e in self.app.resources("AWS::EC2::VPCEndpoint").values()
                if _service(e["Properties"]["ServiceName"]) == service and _ref(e["Properties"]["VpcId"]) == vpc]

    def nat_routes(self, route_table: str) -> bool:
        return any(_ref(r["Properties"]["RouteTableId"]) == route_table
                   and r["Properties"].get("DestinationCidrBlock") == "0.0.0.0/0"
                   and ("NatGatewayId" in r["Properties"] or "TransitGatewayId" in r["Properties"])
                   for r in self.app.resources("AWS::EC2::Route").values())

    def may_leave(self, groups: list[str], port: int, to: set[str]) -> bool:
        """Some group of ``groups`` lets traffic out on ``port`` to a peer in ``to`` (groups, CIDRs, prefix lists)."""
        return any(rule.covers(port) and rule.peer in to for group in groups for rule in self.egress.get(group, []))

    def admits(self, group: str, port: int, sources: list[str], vpc: str) -> bool:
        """``group`` lets ``port`` in from one of ``sources`` (groups), or from a block holding all the VPC."""
        accepted = {*sources, *self.vpc_cidrs(vpc), "cidr:0.0.0.0/0"}
        return any(rule.covers(port) and rule.peer in accepted for rule in self.ingress.get(group, []))

    def path(self, groups: list[str], subnets: list[str], service: str, port: int = HTTPS) -> str | None:
        """Why there is no path from these groups and subnets to ``service`` on ``port`` (None: there is one)."""
        (vpc,) = {self.vpc_of_subnet[s] for s in subnets}
        anywhere = {"cidr:0.0.0.0/0"}
        interface = [e for e in self.endpoints(service, vpc) if e.get("VpcEndpointType") == "Interface"]
        if interface:
            # Private DNS sends the service's name to the endpoint: no other route is taken.
            for endpoint in interface:
                if not endpoint.get("PrivateDnsEnabled") or not self.resolves_privately(vpc):
                    continue
                endpoint_groups = [_ref(g) for g in endpoint.get("SecurityGroupIds", [])]
                if not any(self.admits(g, port, groups, vpc) for g in endpoint_groups):
                    return f"the {service} endpoint's group {endpoint_groups} does not admit {groups} on {port}"
                if not self.may_leave(groups, port, {*endpoint_groups, *anywhere, *self.vpc_cidrs(vpc)}):
                    return f"{groups} may not send to the {service} endpoint on {port}"
                return None
            return f"the {service} endpoint has no private DNS in {vpc}"
        route_tables = {self.route_table_of_subnet[s] for s in subnets}
        if service in GATEWAY_SERVICES:
            for endpoint in self.endpoints(service, vpc):
                if route_tables <= {_ref(r) for r in endpoint.get("RouteTableIds", [])}:
                    prefix_lists = {rule.peer for rule in (r for g in groups for r in self.egress.get(g, []))
                                    if rule.peer.startswith("prefix-list:")}
                    if not self.may_leave(groups, port, anywhere | prefix_lists):
                        return f"{groups} may not send to the {service} gateway endpoint on {port}"
                    return None
        if all(self.nat_routes(table) for table in route_tables):
            return None if self.may_leave(groups, port, anywhere) else f"{groups} may not send out on {port}"
        return f"no endpoint of {service} and no NAT route from {sorted(route_tables)}"

    def kafka_groups(self) -> list[str]:
        clusters = [c["Properties"]["VpcConfigs"][0]["SecurityGroups"]
                    for c in self.app.resources("AWS::MSK::ServerlessCluster").values()]
        clusters += [c["Properties"]["BrokerNodeGroupInfo"]["SecurityGroups"]
                     for c in self.app.resources("AWS::MSK::Cluster").values()]
        (groups,) = clusters
        return [_ref(g) for g in groups]

    def kafka_path(self, groups: list[str], subnets: list[str]) -> str | None:
        (vpc,) = {self.vpc_of_subnet[s] for s in subnets}
        cluster = self.kafka_groups()
        if not any(self.admits(g, KAFKA_IAM_PORT, groups, vpc) for g in cluster):
            return f"the cluster's group {cluster} does not admit {groups} on {KAFKA_IAM_PORT}"
        if not self.may_leave(groups, KAFKA_IAM_PORT, {*cluster, "cidr:0.0.0.0/0", *self.vpc_cidrs(vpc)}):
            return f"{groups} may not send to the cluster on {KAFKA_IAM_PORT}"
        return None

    def cassandra_path(self, groups: list[str], subnets: list[str], env: dict[str, str]) -> str | None:
        port = int(env["CASSANDRA_PORT"])
        if env["CASSANDRA_MODE"] == "keyspaces":
            return self.path(groups, subnets, "cassandra", port)
        # An existing cluster: the route to it (peering, Transit Gateway) is the operator's, outside the template.
        points = env["CASSANDRA_CONTACT_POINTS"].split(",")
        blocks = [ipaddress.ip_network(rule.peer.removeprefix("cidr:")) for group in groups
                  for rule in self.egress.get(group, []) if rule.covers(port) and rule.peer.startswith("cidr:")
                  and not rule.peer.startswith("cidr:{")]
        missing = [p for p in points if not any(ipaddress.ip_address(p) in block for block in blocks)]
        return f"{groups} may not send to {missing} on {port}" if missing else None


def _service(name: Any) -> str:
    """``com.amazonaws.<region>.lambda`` (a join of strings and the region) -> ``lambda``."""
    parts = name["Fn::Join"][1] if isinstance(name, dict) else [name]
    return str(parts[-1]).rsplit(".", 1)[-1]


def missing_paths(app: Synthesized) -> Iterator[str]:
    """Every (function, service) of the template's functions in the VPC that has no path, and why."""
    network = Network(app)
    for name, function in sorted(functions(app).items()):
        vpc_config = function.get("VpcConfig")
        if vpc_config is None:
            continue
        groups = [_ref(g) for g in vpc_config["SecurityGroupIds"]]
        subnets = [_ref(s) for s in vpc_config["SubnetIds"]]
        calls = set(FUNCTION_CALLS[name])
        if function.get("TracingConfig", {}).get("Mode") != "Active":
            calls.discard("xray")
        if "https" not in environment(function).get("JOBRUNNER_TARGET_KINDS", "").split(","):
            calls.discard(INTERNET)  # the delivery function of a stage without HTTPS targets
        for service in sorted(calls):
            if service == "kafka":
                why = network.kafka_path(groups, subnets)
            elif service == "cassandra":
                why = network.cassandra_path(groups, subnets, environment(function))
            else:
                why = network.path(groups, subnets, service)
            if why is not None:
                yield f"{name} -> {service}: {why}"


# The clients a function's wiring creates ----------------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    service: str
    #: The client's own configuration, after botocore has merged and normalized what it was given.
    config: Any


class _Unreachable:
    """A client whose every call fails as an endpoint dropping packets would, at once: the adapters give up."""

    def __init__(self, service: str) -> None:
        self._service = service

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            from botocore.exceptions import ConnectTimeoutError

            raise ConnectTimeoutError(endpoint_url=f"https://{self._service}.{REGION}.amazonaws.com")

        return call


def loads_the_store(name: str) -> bool:
    """Whether the function's handler loads the Cassandra store (``load_adapters(store=True)``); the tick does not."""
    tree = ast.parse((ROOT / "functions" / name / "handler.py").read_text())
    return any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "load_adapters"
               and any(k.arg == "store" and getattr(k.value, "value", False) is True for k in node.keywords)
               for node in ast.walk(tree))


def clients_of(name: str, function: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[Client]:
    """The AWS clients the container of the job runner function ``name`` creates when it builds each of its adapters
    and services, with the function's environment from the template; Cassandra and Kafka are not reached, and a
    function whose handler does not load the store gets none built."""
    import boto3
    import cassandra.cluster
    from cassandra import cluster as driver

    from jobrunner.adapters.publishers.memory import MemoryPublisher
    from jobrunner.adapters.stores.memory import MemoryJobStore
    from jobrunner.config import Settings
    from jobrunner.wiring import Container

    created: list[Client] = []
    real_client = boto3.client

    def client(service: str, *args: Any, **kwargs: Any) -> _Unreachable:
        created.append(Client(service, real_client(service, *args, **kwargs).meta.config))
        return _Unreachable(service)

    def no_cluster(self: driver.Cluster, *args: Any, **kwargs: Any) -> None:
        raise cassandra.cluster.NoHostAvailable("not in a unit test", {})

    with monkeypatch.context() as patch:
        patch.setattr(boto3, "client", client)
        patch.setattr(driver.Cluster, "connect", no_cluster)
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")  # the clients are built, never used
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        container = Container(Settings.from_env(environment(function)), publisher=MemoryPublisher(),
                              store=None if loads_the_store(name) else MemoryJobStore())
        for attribute, value in vars(Container).items():
            if isinstance(value, functools.cached_property):
                # Each fails on the unreachable clients, after creating them.
                with contextlib.suppress(Exception):
                    getattr(container, attribute)
    return created


# The checks ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_function_in_the_vpc_reaches_every_service_it_calls(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    assert list(missing_paths(synth(variant))) == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_msk_triggers_pollers_reach_lambda_sts_sqs_and_the_brokers(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    # The event source mapping polls with the cluster's group, in the cluster's subnets
    app = synth(variant)
    network = Network(app)
    cluster = network.kafka_groups()
    subnets = sorted(network.route_table_of_subnet)

    missing = [f"pollers -> {s}: {why}" for s in sorted(POLLER_CALLS)
               if (why := network.path(cluster, subnets, s)) is not None]
    if (why := network.kafka_path(cluster, subnets)) is not None:
        missing.append(f"pollers -> brokers: {why}")
    assert missing == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_function_in_the_template_declares_what_it_calls(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    # (the delivery function is there on a stage with targets only)
    with_delivery = "targets" in VARIANTS[variant]
    assert set(functions(synth(variant))) == set(FUNCTION_CALLS) - (set() if with_delivery else {"delivery"})


@pytest.mark.parametrize("variant", ["targets", "targets-aws"])
def test_the_delivery_function_reaches_the_internet_only_with_https_targets(
    synth: Callable[[str], Synthesized], variant: str,
) -> None:
    app = synth(variant)
    network = Network(app)
    delivery = functions(app)["delivery"]["VpcConfig"]
    tables = {network.route_table_of_subnet[_ref(s)] for s in delivery["SubnetIds"]}
    https = variant == "targets"

    # With HTTPS targets, a NAT route from each of its subnets; without, none (Lambda and SQS through endpoints)
    assert all(network.nat_routes(table) for table in tables) == any(network.nat_routes(table) for table in tables)
    assert any(network.nat_routes(table) for table in tables) == https
    # And no other function's subnet routes to the NAT
    others = {network.route_table_of_subnet[_ref(s)] for name, f in functions(app).items()
              if name != "delivery" and "VpcConfig" in f for s in f["VpcConfig"]["SubnetIds"]}
    assert not any(network.nat_routes(table) for table in others)
    # And the endpoints it calls admit its group (the delivery has a group of its own)
    groups = [_ref(g) for g in delivery["SecurityGroupIds"]]
    assert [network.path(groups, [_ref(s) for s in delivery["SubnetIds"]], service) for service in
            ("lambda", "sqs", "secretsmanager")] == [None, None, None]


def test_the_delivery_functions_wiring_creates_only_the_clients_it_is_declared_to_call(
    synth: Callable[[str], Synthesized], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the delivery function's container, with its environment from the template, in Lambda
    import boto3

    from jobrunner.config import Settings
    from jobrunner.delivery_wiring import build_deliverer, build_webhook_secrets
    from jobrunner.domain.targets import HttpsTarget, LambdaTarget, SqsTarget
    from jobrunner.wiring import Container

    function = functions(synth("targets"))["delivery"]
    created: list[str] = []
    real_client = boto3.client

    def client(service: str, *args: Any, **kwargs: Any) -> _Unreachable:
        real_client(service, *args, **kwargs)
        created.append(service)
        return _Unreachable(service)

    with monkeypatch.context() as patch:
        patch.setattr(boto3, "client", client)
        patch.setenv("AWS_LAMBDA_FUNCTION_NAME", "jobrunner-delivery")
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        container = Container(Settings.from_env(environment(function)))
        # When it builds its secrets and each deliverer (built on first use)
        build_webhook_secrets(container)
        deliverer = build_deliverer(container)
        for kind in (HttpsTarget, LambdaTarget, SqsTarget):
            deliverer._of(kind)  # type: ignore[attr-defined]
    # Then it created clients only of the services the delivery is declared to call
    assert set(created) == {"secretsmanager", "lambda", "sqs"} <= FUNCTION_CALLS["delivery"]


@pytest.mark.parametrize("variant", ["default", "existing-cassandra"])
@pytest.mark.parametrize("name", JOBRUNNER_FUNCTIONS)
def test_the_declaration_covers_the_clients_each_functions_wiring_creates(
    synth: Callable[[str], Synthesized], monkeypatch: pytest.MonkeyPatch, variant: str, name: str,
) -> None:
    # Given the function's container, built with its environment from the template
    # When it builds every adapter and service it has
    created = {client.service for client in clients_of(name, functions(synth(variant))[name], monkeypatch)}
    # Then it created clients only of the services the function is declared to call (so the network has a path)
    assert created <= FUNCTION_CALLS[name]
    assert "lambda" in created and "dynamodb" in created  # the probe sees the clients (wakes, heartbeats)


def test_the_check_finds_a_dropped_path(default_app: Synthesized) -> None:
    # Given the template with the Lambda endpoint's group admitting the pollers only (the state #32 found)
    template = json.loads(json.dumps(default_app.template))
    (lambda_group,) = [_ref(e["Properties"]["SecurityGroupIds"][0]) for e in template["Resources"].values()
                       if e["Type"] == "AWS::EC2::VPCEndpoint" and _service(e["Properties"]["ServiceName"]) == "lambda"]
    functions_group = _ref(functions(default_app)["api"]["VpcConfig"]["SecurityGroupIds"][0])
    template["Resources"] = {
        lid: r for lid, r in template["Resources"].items()
        if not (r["Type"] == "AWS::EC2::SecurityGroupIngress" and _ref(r["Properties"]["GroupId"]) == lambda_group
                and _ref(r["Properties"].get("SourceSecurityGroupId")) == functions_group)}
    broken = type(default_app)(default_app.variant, default_app.outdir, template, default_app.report, None)
    # Then every function that wakes scans is reported
    missing = list(missing_paths(broken))
    assert sorted(m.split(" ")[0] for m in missing if "-> lambda" in m) == ["api", "reconcile", "results", "scan"]
