from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

from infra.config import ZONE_IDS, ConfigError, is_zone_id
from infra.constructs.network import InterfaceEndpoint, Network

if TYPE_CHECKING:
    import aws_cdk as cdk


def _network(stack: cdk.Stack, *endpoints: InterfaceEndpoint) -> tuple[Network, Template]:
    network = Network(stack, "Net", cidr="10.40.0.0/16", interface_endpoints=set(endpoints),
                      flow_log_retention=logs.RetentionDays.ONE_MONTH)
    return network, Template.from_stack(stack)


def _id(stack: cdk.Stack, construct: Any) -> str:
    return stack.get_logical_id(construct.node.default_child)


def test_isolated_subnets_in_two_zones_and_no_route_out(stack: cdk.Stack) -> None:
    _net, template = _network(stack)

    template.resource_count_is("AWS::EC2::Subnet", 2)
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 0)
    template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL"})
    template.has_resource_properties("AWS::EC2::VPCEndpoint", {
        "VpcEndpointType": "Gateway",
        "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".dynamodb"]]},
    })


def test_only_the_requested_interface_endpoints_exist(stack: cdk.Stack) -> None:
    _net, template = _network(stack, InterfaceEndpoint.KEYSPACES, InterfaceEndpoint.STS)

    endpoints = template.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}})
    services = sorted(e["Properties"]["ServiceName"]["Fn::Join"][1][-1] for e in endpoints.values())
    assert services == [".cassandra", ".sts"]


def test_keyspaces_endpoint_accepts_cql_from_the_functions_only(stack: cdk.Stack) -> None:
    network, template = _network(stack, InterfaceEndpoint.KEYSPACES)
    group = network.endpoints[InterfaceEndpoint.KEYSPACES].connections.security_groups[0]

    template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "IpProtocol": "tcp", "FromPort": 9142, "ToPort": 9142,
        "GroupId": {"Fn::GetAtt": [_id(stack, group), "GroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [_id(stack, network.function_security_group), "GroupId"]},
    })


def test_secrets_manager_endpoint_accepts_https_from_the_functions_only(stack: cdk.Stack) -> None:
    # Given the Secrets Manager endpoint (the functions read the result key at cold start; no NAT to go out by)
    network, template = _network(stack, InterfaceEndpoint.SECRETS_MANAGER)
    endpoint = network.endpoints[InterfaceEndpoint.SECRETS_MANAGER]
    group = endpoint.connections.security_groups[0]

    # Then it resolves the service's public name inside the VPC, in the isolated subnets
    template.has_resource_properties("AWS::EC2::VPCEndpoint", {
        "VpcEndpointType": "Interface", "PrivateDnsEnabled": True,
        "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".secretsmanager"]]},
        "SecurityGroupIds": [{"Fn::GetAtt": [_id(stack, group), "GroupId"]}],
    })
    # And its group admits HTTPS from the functions' group, and nothing else (not the workers)
    ingress = template.find_resources("AWS::EC2::SecurityGroupIngress", {"Properties": {
        "GroupId": {"Fn::GetAtt": [_id(stack, group), "GroupId"]}}})
    assert [(r["Properties"]["FromPort"], r["Properties"]["SourceSecurityGroupId"]) for r in ingress.values()] == [
        (443, {"Fn::GetAtt": [_id(stack, network.function_security_group), "GroupId"]})]
    (own,) = [g for lid, g in template.find_resources("AWS::EC2::SecurityGroup").items() if lid == _id(stack, group)]
    assert "SecurityGroupIngress" not in own["Properties"]


def test_kafka_port_is_open_to_the_functions_and_the_pollers(stack: cdk.Stack) -> None:
    network, template = _network(stack)
    kafka = {"Fn::GetAtt": [_id(stack, network.kafka_security_group), "GroupId"]}
    functions = {"Fn::GetAtt": [_id(stack, network.function_security_group), "GroupId"]}

    for source in (kafka, functions):
        template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
            "FromPort": 9098, "ToPort": 9098, "GroupId": kafka, "SourceSecurityGroupId": source,
        })


def test_no_security_group_allows_all_traffic_out(stack: cdk.Stack) -> None:
    _network(stack, *InterfaceEndpoint)
    template = Template.from_stack(stack)

    for group in template.find_resources("AWS::EC2::SecurityGroup").values():
        for rule in group["Properties"].get("SecurityGroupEgress", []):
            assert rule.get("IpProtocol") != "-1", rule
    assert template.find_resources("AWS::EC2::SecurityGroupEgress", {"Properties": {"IpProtocol": "-1"}}) == {}
    template.has_resource_properties("AWS::EC2::SecurityGroup", {
        "SecurityGroupEgress": Match.array_with([Match.object_like({"FromPort": 443, "CidrIp": "0.0.0.0/0"})]),
    })


def _subnet_zones(template: Template) -> list[dict[str, Any]]:
    return [{k: v for k, v in subnet["Properties"].items() if k.startswith("AvailabilityZone")}
            for subnet in template.find_resources("AWS::EC2::Subnet").values()]


def test_zones_are_pinned_by_zone_id_from_the_region_mapping_not_the_regions_first_two(stack: cdk.Stack) -> None:
    # Given a stack whose region is known only at deploy time
    _net, template = _network(stack)
    mapping = next(iter(template.to_json()["Mappings"]))

    # Then each subnet takes a zone ID of ZONE_IDS for the deploy's region, never Fn::GetAZs' first two
    assert _subnet_zones(template) == [{"AvailabilityZoneId": {"Fn::FindInMap": [mapping, {"Ref": "AWS::Region"}, key]}}
                                       for key in ("first", "second")]
    template.has_mapping(mapping, {region: {"first": first, "second": second}
                                   for region, (first, second) in ZONE_IDS.items()})
    # And a region the mapping lacks is refused before anything is created, saying what to set
    rule = next(r for r in template.to_json()["Rules"].values()
                if "availability_zones" in r["Assertions"][0]["AssertDescription"])
    assert rule["Assertions"][0]["Assert"] == {"Fn::Contains": [sorted(ZONE_IDS), {"Ref": "AWS::Region"}]}


def test_the_default_zone_lists_avoid_the_zones_known_to_lack_services() -> None:
    for region, zones in ZONE_IDS.items():
        assert len(set(zones)) == 2 and all(is_zone_id(z) for z in zones), region
    assert not {"use1-az3", "usw1-az2", "apne1-az3"} & {z for zones in ZONE_IDS.values() for z in zones}


def test_a_stack_with_a_known_region_gets_its_zone_ids_resolved() -> None:
    import aws_cdk as cdk

    stack = cdk.Stack(cdk.App(), "Pinned", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    _net, template = _network(stack)

    assert _subnet_zones(template) == [{"AvailabilityZoneId": "euw1-az1"}, {"AvailabilityZoneId": "euw1-az2"}]
    assert "Mappings" not in template.to_json()


def test_zone_ids_survive_the_cdk_clis_zone_lookup_of_a_pinned_stack() -> None:
    import aws_cdk as cdk

    # Given a stack pinned to an account and region, and the zone names the cdk CLI looked up for it
    app = cdk.App(context={"availability-zones:account=123456789012:region=eu-west-1":
                           ["eu-west-1a", "eu-west-1b", "eu-west-1c"]})
    stack = cdk.Stack(app, "Pinned", env=cdk.Environment(account="123456789012", region="eu-west-1"))

    # When the VPC is laid out by zone ID (never among those names), Then it is not refused as "not a subset"
    _net, template = _network(stack)
    assert _subnet_zones(template) == [{"AvailabilityZoneId": "euw1-az1"}, {"AvailabilityZoneId": "euw1-az2"}]


def test_a_known_region_without_a_zone_list_is_refused_at_synth() -> None:
    import aws_cdk as cdk

    stack = cdk.Stack(cdk.App(), "Far", env=cdk.Environment(account="123456789012", region="me-central-1"))
    with pytest.raises(ConfigError, match="availability_zones"):
        _network(stack)


@pytest.mark.parametrize(("zones", "expected"), [
    (("use1-az4", "use1-az6", "use1-az5"), [{"AvailabilityZoneId": z} for z in ("use1-az4", "use1-az6", "use1-az5")]),
    (("us-east-1a", "us-east-1b"), [{"AvailabilityZone": z} for z in ("us-east-1a", "us-east-1b")]),
])
def test_zones_given_by_id_or_by_name_are_used_as_given(
    stack: cdk.Stack, zones: tuple[str, ...], expected: list[dict[str, str]],
) -> None:
    Network(stack, "Net", cidr="10.40.0.0/16", availability_zones=zones, interface_endpoints=set(),
            flow_log_retention=logs.RetentionDays.ONE_MONTH)

    assert _subnet_zones(Template.from_stack(stack)) == expected


def _interface_subnets(template: Template) -> list[list[Any]]:
    endpoints = template.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}})
    return [e["Properties"]["SubnetIds"] for e in endpoints.values()]


def test_interface_endpoints_sit_in_every_zone_by_default(stack: cdk.Stack) -> None:
    _net, template = _network(stack, InterfaceEndpoint.KEYSPACES, InterfaceEndpoint.XRAY)

    assert [len(subnets) for subnets in _interface_subnets(template)] == [2, 2]


def test_interface_endpoints_in_the_first_zone_only(stack: cdk.Stack) -> None:
    # Given endpoint_zones=1 (a cheaper dev stage)
    network = Network(stack, "Net", cidr="10.40.0.0/16", interface_endpoints=set(InterfaceEndpoint),
                      endpoint_zones=1, flow_log_retention=logs.RetentionDays.ONE_MONTH)
    template = Template.from_stack(stack)
    first = {"Ref": _id(stack, network.vpc.isolated_subnets[0])}

    # Then every interface endpoint has its one network interface in the first zone's subnet
    assert _interface_subnets(template) == [[first]] * len(InterfaceEndpoint)
    # And the functions, in both zones, keep resolving the services' names to it (private DNS is VPC-wide)
    interface = {"Properties": {"VpcEndpointType": "Interface"}}
    assert all(e["Properties"]["PrivateDnsEnabled"]
               for e in template.find_resources("AWS::EC2::VPCEndpoint", interface).values())
    # And the DynamoDB gateway endpoint, which has no zones, still serves both subnets' route tables
    (gateway,) = template.find_resources("AWS::EC2::VPCEndpoint",
                                         {"Properties": {"VpcEndpointType": "Gateway"}}).values()
    assert len(gateway["Properties"]["RouteTableIds"]) == 2


def test_endpoint_zones_beyond_the_vpcs_zones_are_refused(stack: cdk.Stack) -> None:
    with pytest.raises(ConfigError, match="endpoint_zones: 3, but the VPC has 2 zones"):
        Network(stack, "Net", cidr="10.40.0.0/16", interface_endpoints={InterfaceEndpoint.STS}, endpoint_zones=3,
                flow_log_retention=logs.RetentionDays.ONE_MONTH)
