from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

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
