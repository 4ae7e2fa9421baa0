"""The VPC: isolated subnets (no NAT, no internet), VPC endpoints, flow logs, security groups; and, for a stage whose
jobs may name HTTPS targets, a way out for the delivery function alone.

Functions in the VPC reach AWS only through endpoints: DynamoDB (gateway, free) always, and the
interface endpoints the stack asks for: Keyspaces (``cassandra``, port 9142); Lambda, for the functions'
wakes of scans and for the MSK event source mapping, whose pollers run in the cluster's subnets with the
cluster's security group and call Lambda and STS, and SQS for its on-failure destination; X-Ray, so that
the functions' trace subsegments leave the VPC; Secrets Manager, for the functions that read a secret (the
result key; an existing Cassandra cluster's credentials). Three security groups, none with "allow all outbound":
- ``functions``: HTTPS to the endpoints (Lambda's too: #32), 9098 to Kafka (and 9142 to Keyspaces' endpoint);
- ``kafka``: the MSK cluster (serverless or provisioned brokers); 9098 in from the functions, the workers
  and itself (the pollers);
- ``workers``: for the user's workers in these subnets: 9098 to Kafka, HTTPS to the endpoints;
- ``delivery`` (a stage with targets): the delivery function: 9098 to Kafka, HTTPS to the endpoints, and with
  HTTPS targets any TCP port anywhere (a webhook's URL may name a port; which addresses it may reach is the
  delivery's own rule, checked on the resolved address at connect time: ``domain/targets/addresses.py``).
With HTTPS targets (``nat_gateways``), the VPC gets public subnets holding NAT gateways, and "egress" subnets
routed through them, for the delivery function only: every other function stays in the isolated subnets. The new
subnet groups come after the isolated one, so its subnets keep their addresses and logical ids. Lambda and SQS
targets need no NAT: their calls go to the Lambda and SQS endpoints (both there for the MSK trigger's pollers).
Each interface endpoint has its own group, open on its port to the groups above that use it: those whose
callers (``FUNCTION_CALLS``, ``POLLER_CALLS``) name its service. An
interface endpoint sits in every zone, or (``endpoint_zones``) in the first N only: private DNS gives
the endpoint's addresses to every subnet, so the other zones reach it across zones (and lose it with
its zone); that halves its hourly price in two zones. The DynamoDB gateway endpoint has no zones.

Zones are pinned by zone ID (the same physical zone in every account): the two ``ZONE_IDS`` lists for
the region, through a template mapping when the region is only known at deploy time (a rule refuses a
region the mapping lacks), or the zones given (IDs or names).
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import TYPE_CHECKING

import jsii
from aws_cdk import (
    Aws,
    CfnMapping,
    CfnRule,
    CfnRuleAssertion,
    Fn,
    IStableStringProducer,
    Lazy,
    RemovalPolicy,
    Stack,
    Token,
)
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import ZONE_IDS, ConfigError, is_zone_id

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

KAFKA_IAM_PORT = 9098

#: What each function's code calls over the network, declared once, by the service's name (boto3's and the
#: endpoint's): ``dynamodb``, an ``InterfaceEndpoint`` value, or ``kafka``; ``cassandra`` is Keyspaces' endpoint
#: or an existing cluster; ``xray`` is active tracing's subsegments. The endpoints' groups admit the functions'
#: group to every service named here, and tests/infra/test_network_paths.py checks that this covers the AWS
#: clients each function's wiring creates and finds a path from each function to each service in the template:
#: a caller left out is one whose packets an endpoint drops (#32: the wakes of scans, through Lambda's).
FUNCTION_CALLS: Mapping[str, frozenset[str]] = MappingProxyType({
    # The writers of rows read the segment count and wake scans; each reads an existing cluster's credentials.
    "api": frozenset({"dynamodb", "lambda", "cassandra", "secretsmanager", "xray"}),
    "tick": frozenset({"dynamodb", "lambda", "xray"}),  # outside the VPC: it needs no endpoint
    # ... and the scan and results functions read the result key and publish.
    "scan": frozenset({"dynamodb", "lambda", "cassandra", "secretsmanager", "kafka", "xray"}),
    "results": frozenset({"dynamodb", "lambda", "cassandra", "secretsmanager", "kafka", "xray"}),
    "reconcile": frozenset({"dynamodb", "lambda", "cassandra", "secretsmanager", "xray"}),
    "topic_admin": frozenset({"kafka", "xray"}),  # infra/handlers/kafka_topics
    # The targets (Lambda, SQS, and "https": the internet, through a NAT gateway, when HTTPS targets are allowed),
    # the tenants' webhook secrets, and the outcomes it publishes.
    "delivery": frozenset({"lambda", "sqs", "secretsmanager", "kafka", "xray", "https"}),
})
#: What only a NAT route reaches: an HTTPS target (any host on the internet).
INTERNET = "https"
#: What the MSK event source mapping's pollers call, with the cluster's group: Lambda (the results function),
#: STS (its role), SQS (its on-failure destination).
POLLER_CALLS = frozenset({"lambda", "sts", "sqs"})


class InterfaceEndpoint(enum.Enum):
    KEYSPACES = "cassandra"
    LAMBDA = "lambda"
    STS = "sts"
    SECRETS_MANAGER = "secretsmanager"
    SQS = "sqs"
    XRAY = "xray"

    @property
    def service(self) -> ec2.InterfaceVpcEndpointAwsService:
        return {
            InterfaceEndpoint.KEYSPACES: ec2.InterfaceVpcEndpointAwsService.KEYSPACES,
            InterfaceEndpoint.LAMBDA: ec2.InterfaceVpcEndpointAwsService.LAMBDA_,
            InterfaceEndpoint.STS: ec2.InterfaceVpcEndpointAwsService.STS,
            InterfaceEndpoint.SECRETS_MANAGER: ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
            InterfaceEndpoint.SQS: ec2.InterfaceVpcEndpointAwsService.SQS,
            InterfaceEndpoint.XRAY: ec2.InterfaceVpcEndpointAwsService.XRAY,
        }[self]


class Network(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cidr: str,
        availability_zones: Sequence[str] = (),
        interface_endpoints: Collection[InterfaceEndpoint],
        endpoint_zones: int | None = None,
        flow_log_retention: logs.RetentionDays,
        delivery: bool = False,
        nat_gateways: int = 0,
    ) -> None:
        """``delivery``: a security group for the delivery function; ``nat_gateways``: that many NAT gateways (one
        per zone at most) and the egress subnets routed through them (module docstring)."""
        super().__init__(scope, construct_id)
        zone_names = [] if not availability_zones or is_zone_id(availability_zones[0]) else list(availability_zones)
        zone_ids = [] if zone_names else list(availability_zones) or self._default_zone_ids()
        self.vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            # With zone IDs, the subnets are laid out per ID and get AvailabilityZoneId below instead. The IDs
            # go in as tokens: in a stack pinned to an account and region, the Vpc checks the zones it is given
            # against the zone *names* the cdk CLI looked up, and a zone ID is never among them.
            availability_zones=zone_names or [_opaque(z) for z in zone_ids],
            nat_gateways=nat_gateways,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=22),
                *([ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=26,
                                           map_public_ip_on_launch=False),
                   ec2.SubnetConfiguration(name="egress", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                                           cidr_mask=22)] if nat_gateways else []),
            ],
            restrict_default_security_group=False,  # nothing uses it; restricting needs a custom resource
        )
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        #: Where the delivery function runs: the egress subnets (with a NAT route), or the isolated ones.
        self.delivery_subnets = (ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS) if nat_gateways
                                 else self.subnets)
        #: The zone ID of each subnet (strings, or tokens resolved from the mapping at deploy time); empty
        #: when the zones were given by name.
        self.zone_ids = zone_ids
        for tier in (self.vpc.isolated_subnets, self.vpc.public_subnets, self.vpc.private_subnets):
            for subnet, zone_id in zip(tier if tier and zone_ids else [], zone_ids if tier else [], strict=True):
                cfn_subnet = subnet.node.default_child
                assert isinstance(cfn_subnet, ec2.CfnSubnet)
                cfn_subnet.add_property_deletion_override("AvailabilityZone")
                cfn_subnet.add_property_override("AvailabilityZoneId", zone_id)
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=flow_log_retention, removal_policy=RemovalPolicy.DESTROY)
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
        self.vpc.add_gateway_endpoint("DynamoDB", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB)

        self.function_security_group = ec2.SecurityGroup(
            self, "Functions", vpc=self.vpc, allow_all_outbound=False,
            description="Job runner functions in the VPC",
        )
        # The description says serverless whatever the cluster: changing it would replace the group, and with it
        # the cluster's network interfaces.
        self.kafka_security_group = ec2.SecurityGroup(
            self, "Kafka", vpc=self.vpc, allow_all_outbound=False,
            description="MSK Serverless cluster and its Lambda event source pollers",
        )
        # Workers (examples/worker.py, or yours) run in these subnets with this group: Kafka only.
        self.worker_security_group = ec2.SecurityGroup(
            self, "Workers", vpc=self.vpc, allow_all_outbound=False,
            description="Job runner workers: consume jobs, report to job-results (attach to your worker)",
        )
        self.delivery_security_group = (ec2.SecurityGroup(
            self, "Delivery", vpc=self.vpc, allow_all_outbound=False,
            description="Job runner delivery function: the targets, Kafka and the VPC endpoints",
        ) if delivery else None)
        # The subnets have no route but to the VPC endpoints, so HTTPS "anywhere" reaches only those
        # (and DynamoDB through its gateway endpoint, whose prefix list is not known offline).
        for group in (self.function_security_group, self.kafka_security_group, self.worker_security_group):
            group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "AWS APIs through the VPC endpoints")
        kafka = ec2.Port.tcp(KAFKA_IAM_PORT)
        if self.delivery_security_group is not None:
            out = self.delivery_security_group
            if nat_gateways:
                out.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp_range(1, 65535),
                                    "HTTPS targets on any port (the delivery checks each address), AWS APIs")
            else:
                out.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "AWS APIs through the VPC endpoints")
            self.kafka_security_group.add_ingress_rule(out, kafka, "Kafka (IAM) from the delivery function")
            out.add_egress_rule(self.kafka_security_group, kafka, "Kafka (IAM)")
        self.kafka_security_group.add_ingress_rule(self.function_security_group, kafka, "Kafka (IAM) from functions")
        self.function_security_group.add_egress_rule(self.kafka_security_group, kafka, "Kafka (IAM)")
        self.kafka_security_group.add_ingress_rule(self.worker_security_group, kafka, "Kafka (IAM) from workers")
        self.worker_security_group.add_egress_rule(self.kafka_security_group, kafka, "Kafka (IAM)")
        self.kafka_security_group.add_ingress_rule(self.kafka_security_group, kafka, "Kafka (IAM) from the pollers")
        self.kafka_security_group.add_egress_rule(self.kafka_security_group, kafka, "Kafka (IAM) to the brokers")

        # Each interface endpoint has its own security group, open only to the groups whose callers use it.
        function_calls = frozenset().union(*(calls for name, calls in FUNCTION_CALLS.items() if name != "delivery"))
        callers: list[tuple[ec2.SecurityGroup, frozenset[str]]] = [
            (self.function_security_group, function_calls), (self.kafka_security_group, POLLER_CALLS)]
        if self.delivery_security_group is not None:
            callers.append((self.delivery_security_group, FUNCTION_CALLS["delivery"]))
        clients = {endpoint: [group for group, calls in callers if endpoint.value in calls]
                   for endpoint in InterfaceEndpoint}
        self.endpoint_subnets = self._endpoint_subnets(endpoint_zones)
        self.endpoints: dict[InterfaceEndpoint, ec2.InterfaceVpcEndpoint] = {}
        for endpoint in sorted(interface_endpoints, key=lambda e: e.value):
            name = endpoint.name.title().replace("_", "")
            group = ec2.SecurityGroup(self, f"{name}Endpoint", vpc=self.vpc, allow_all_outbound=False,
                                      description=f"VPC endpoint: {endpoint.value}")
            self.endpoints[endpoint] = self.vpc.add_interface_endpoint(
                name, service=endpoint.service, private_dns_enabled=True, subnets=self.endpoint_subnets, open=False,
                security_groups=[group],
            )
            for client in clients[endpoint]:
                self.endpoints[endpoint].connections.allow_default_port_from(client, f"{endpoint.value} endpoint")

    def _endpoint_subnets(self, zones: int | None) -> ec2.SubnetSelection:
        """Every subnet, or those of the first ``zones`` zones (one subnet per zone)."""
        if zones is None:
            return self.subnets
        subnets = self.vpc.isolated_subnets
        if not 1 <= zones <= len(subnets):
            raise ConfigError(f"endpoint_zones: {zones}, but the VPC has {len(subnets)} zones")
        return ec2.SubnetSelection(subnets=subnets[:zones])

    def _default_zone_ids(self) -> list[str]:
        """``ZONE_IDS[region]``: resolved here if the stack's region is known, else looked up at deploy time."""
        region = Stack.of(self).region
        if not Token.is_unresolved(region):
            if region not in ZONE_IDS:
                raise ConfigError(f"no default zones for {region}: set availability_zones to two zone IDs "
                                  f"(aws ec2 describe-availability-zones --region {region})")
            return list(ZONE_IDS[region])
        mapping = CfnMapping(self, "ZoneIds", mapping={
            region: {"first": first, "second": second} for region, (first, second) in sorted(ZONE_IDS.items())})
        CfnRule(self, "RegionHasZones", assertions=[CfnRuleAssertion(
            assert_=Fn.condition_contains(sorted(ZONE_IDS), Aws.REGION),
            assert_description=("This region has no default zones in infra/config/parts.py ZONE_IDS: deploy with "
                                "-c 'availability_zones=[\"<zone id>\",\"<zone id>\"]'"),
        )])
        return [mapping.find_in_map(Aws.REGION, "first"), mapping.find_in_map(Aws.REGION, "second")]

    @property
    def vpc_cidr(self) -> str:
        return self.vpc.vpc_cidr_block


@jsii.implements(IStableStringProducer)
class _Constant:
    def __init__(self, value: str) -> None:
        self.value = value

    def produce(self) -> str:
        return self.value


def _opaque(zone_id: str) -> str:
    """``zone_id`` as a token (resolved to itself), so that construct-time checks on zone names skip it."""
    return zone_id if Token.is_unresolved(zone_id) else Lazy.string(_Constant(zone_id))
