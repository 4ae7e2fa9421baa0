"""Kafka: an MSK cluster with IAM auth, its bootstrap brokers, and the topics the system uses.

- The cluster: MSK Serverless, or (``provisioned``) a provisioned cluster of Standard brokers, far
  cheaper at zero load. Both take IAM clients only, over TLS on 9098, in the stack's subnets with the
  Kafka security group, and have ARNs of one form (``cluster/<name>/<uuid>``), so the topic and group
  ARNs of the grants below hold for either. A provisioned cluster's topics take MSK's default
  replication (factor 2 and min.insync.replicas 1 in two zones, 3 and 2 in three; topics are not
  auto-created), so it gets no configuration of its own. Only MSK Serverless has endpoints in other
  VPCs (``client_vpcs``).
- Bootstrap brokers: CloudFormation does not return them, so a custom resource calls
  ``kafka:GetBootstrapBrokers`` at deploy time; the functions get the string in ``KAFKA_BOOTSTRAP``.
- Topics: ``AWS::MSK::Topic`` (the MSK topic API) serves provisioned clusters only, so a custom
  resource, for either kind, runs ``infra/handlers/kafka_topics`` in the VPC: kafka-python's admin
  client over IAM auth creates each missing topic. Existing topics are never changed or deleted by it.
- Grants are per action set on the cluster, topic and group ARNs (``kafka-cluster:*``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Aws, CfnElement, CustomResource, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_msk as msk
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.constructs.function import FunctionBase, JobRunnerFunction
from infra.constructs.nag import acknowledge

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path

    from aws_cdk import aws_ec2 as ec2

    from infra.config import KafkaClientVpc, ProvisionedKafka

#: The id of the one Lambda function CDK shares between all AwsCustomResource instances of a stack.
AWS_CUSTOM_RESOURCE_FUNCTION_ID = "AWS679f53fac002430cb0da5b7982bd2287"


def _logical_id(construct: Construct) -> str:
    resource = construct.node.default_child
    if not isinstance(resource, CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    return Stack.of(construct).get_logical_id(resource)


class Streaming(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        subnets: Iterable[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        topics: Mapping[str, int],
        topic_admin_code: Path,
        base: FunctionBase,
        log_retention: logs.RetentionDays,
        client_vpcs: Sequence[KafkaClientVpc] = (),
        provisioned: ProvisionedKafka | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.cluster_name = cluster_name
        self.topics = dict(topics)
        subnets = list(subnets)
        self.cluster: msk.CfnServerlessCluster | msk.CfnCluster
        if provisioned is None:
            self.cluster = self._serverless_cluster(subnets, security_group, client_vpcs)
        elif client_vpcs:
            raise ValueError("client_vpcs: only an MSK Serverless cluster has endpoints in other VPCs")
        else:
            self.cluster = self._provisioned_cluster(provisioned, subnets, security_group, log_retention)
        self.cluster_arn = self.cluster.attr_arn
        # arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid>: topics and groups are named under <name>/<uuid>.
        self._cluster_uuid = Fn.select(2, Fn.split("/", self.cluster_arn))

        brokers = cr.AwsCustomResource(
            self, "BootstrapBrokers",
            on_create=self._get_bootstrap_brokers(),
            on_update=self._get_bootstrap_brokers(),
            policy=cr.AwsCustomResourcePolicy.from_statements([
                iam.PolicyStatement(actions=["kafka:GetBootstrapBrokers"], resources=[self.cluster_arn]),
            ]),
            install_latest_aws_sdk=False,
            log_group=logs.LogGroup(self, "BootstrapBrokersLogs", retention=log_retention,
                                    removal_policy=RemovalPolicy.DESTROY),
        )
        self.bootstrap_brokers = brokers.get_response_field("BootstrapBrokerStringSaslIam")
        self._acknowledge_sdk_function()

        admin = JobRunnerFunction(
            self, "TopicAdmin", base=base, code=topic_admin_code, in_vpc=True,
            description="Creates the Kafka topics (custom resource)", memory_size=256, timeout=Duration.minutes(5),
        )
        self.grant_create_topics(admin.role, self.topics)
        provider = cr.Provider(
            self, "TopicsProvider", on_event_handler=admin.function,
            log_group=logs.LogGroup(self, "TopicsProviderLogs", retention=log_retention,
                                    removal_policy=RemovalPolicy.DESTROY),
        )
        acknowledge(provider, {
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]": "The CDK Provider framework's own function; the managed policy "
                                            "only lets it write its logs.",
            f"AwsSolutions-IAM5[Resource::<{_logical_id(admin.function)}"
            ".Arn>:*]": "CDK's Provider framework may invoke any version of the topic admin function.",
        })
        self.topics_resource = CustomResource(
            self, "Topics", service_token=provider.service_token, resource_type="Custom::KafkaTopics",
            properties={
                "BootstrapServers": self.bootstrap_brokers,
                "Topics": [{"Name": name, "Partitions": count} for name, count in sorted(self.topics.items())],
            },
        )

    # The cluster ------------------------------------------------------------------------------------

    def _serverless_cluster(self, subnets: Sequence[ec2.ISubnet], security_group: ec2.ISecurityGroup,
                            client_vpcs: Sequence[KafkaClientVpc]) -> msk.CfnServerlessCluster:
        return msk.CfnServerlessCluster(
            self, "Cluster",
            cluster_name=self.cluster_name,
            client_authentication=msk.CfnServerlessCluster.ClientAuthenticationProperty(
                sasl=msk.CfnServerlessCluster.SaslProperty(iam=msk.CfnServerlessCluster.IamProperty(enabled=True)),
            ),
            # The stack's VPC, then each VPC whose clients (workers) reach the cluster directly (up to 5 in all):
            # no peering, the cluster has endpoints in each.
            vpc_configs=[msk.CfnServerlessCluster.VpcConfigProperty(
                subnet_ids=[s.subnet_id for s in subnets], security_groups=[security_group.security_group_id],
            )] + [msk.CfnServerlessCluster.VpcConfigProperty(
                subnet_ids=list(v.subnet_ids), security_groups=list(v.security_group_ids) or None,
            ) for v in client_vpcs],
        )

    def _provisioned_cluster(self, brokers: ProvisionedKafka, subnets: Sequence[ec2.ISubnet],
                             security_group: ec2.ISecurityGroup, log_retention: logs.RetentionDays) -> msk.CfnCluster:
        """``brokers.brokers_per_zone`` brokers in each subnet's zone; IAM clients only, TLS everywhere."""
        broker_logs = logs.LogGroup(self, "BrokerLogs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY)
        return msk.CfnCluster(
            self, "ProvisionedCluster",
            cluster_name=self.cluster_name,
            kafka_version=brokers.kafka_version,
            # MSK spreads the brokers evenly over the client subnets, so a multiple of their number.
            number_of_broker_nodes=brokers.brokers_per_zone * len(subnets),
            broker_node_group_info=msk.CfnCluster.BrokerNodeGroupInfoProperty(
                client_subnets=[s.subnet_id for s in subnets],
                instance_type=brokers.instance_type,
                security_groups=[security_group.security_group_id],
                storage_info=msk.CfnCluster.StorageInfoProperty(
                    ebs_storage_info=msk.CfnCluster.EBSStorageInfoProperty(volume_size=brokers.storage_gib)),
            ),
            client_authentication=msk.CfnCluster.ClientAuthenticationProperty(
                sasl=msk.CfnCluster.SaslProperty(iam=msk.CfnCluster.IamProperty(enabled=True)),
                unauthenticated=msk.CfnCluster.UnauthenticatedProperty(enabled=False),
            ),
            # At rest: no key given, so MSK encrypts the volumes with its AWS managed key.
            encryption_info=msk.CfnCluster.EncryptionInfoProperty(
                encryption_in_transit=msk.CfnCluster.EncryptionInTransitProperty(client_broker="TLS", in_cluster=True),
            ),
            logging_info=msk.CfnCluster.LoggingInfoProperty(broker_logs=msk.CfnCluster.BrokerLogsProperty(
                cloud_watch_logs=msk.CfnCluster.CloudWatchLogsProperty(enabled=True,
                                                                       log_group=broker_logs.log_group_name),
            )),
        )

    def _get_bootstrap_brokers(self) -> cr.AwsSdkCall:
        return cr.AwsSdkCall(
            service="Kafka", action="getBootstrapBrokers", parameters={"ClusterArn": self.cluster_arn},
            physical_resource_id=cr.PhysicalResourceId.of(f"{self.cluster_name}-bootstrap-brokers"),
            output_paths=["BootstrapBrokerStringSaslIam"],
        )

    def _acknowledge_sdk_function(self) -> None:
        function = Stack.of(self).node.try_find_child(AWS_CUSTOM_RESOURCE_FUNCTION_ID)
        if function is not None:
            acknowledge(function, {
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]": "CDK's AwsCustomResource function; the managed policy only lets it "
                                                "write its logs.",
            })

    # ARNs ----------------------------------------------------------------------------------------

    def _arn(self, kind: str, name: str) -> str:
        account = f"arn:{Aws.PARTITION}:kafka:{Aws.REGION}:{Aws.ACCOUNT_ID}"
        return f"{account}:{kind}/{self.cluster_name}/{self._cluster_uuid}/{name}"

    def topic_arn(self, topic: str) -> str:
        return self._arn("topic", topic)

    def group_arn(self, group: str) -> str:
        return self._arn("group", group)

    # Grants --------------------------------------------------------------------------------------

    def _grant(self, grantee: iam.IGrantable, actions: list[str], resources: list[str]) -> iam.Grant:
        return iam.Grant.add_to_principal(grantee=grantee, actions=actions, resource_arns=resources)

    def grant_produce(self, grantee: iam.IGrantable, topics: Iterable[str]) -> None:
        """Idempotent producer (kafka-python's default) on ``topics``."""
        self._grant(grantee, ["kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"], [self.cluster_arn])
        self._grant(grantee, ["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"],
                    [self.topic_arn(t) for t in sorted(set(topics))])

    def grant_consume(self, grantee: iam.IGrantable, *, topic: str, group: str) -> None:
        """What a Lambda MSK event source mapping needs, on its execution role, to read ``topic`` as ``group``."""
        self._grant(grantee, ["kafka-cluster:Connect", "kafka-cluster:DescribeClusterDynamicConfiguration"],
                    [self.cluster_arn])
        self._grant(grantee, ["kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"], [self.topic_arn(topic)])
        self._grant(grantee, ["kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup"], [self.group_arn(group)])
        self._grant(grantee, ["kafka:DescribeClusterV2", "kafka:GetBootstrapBrokers"], [self.cluster_arn])

    def worker_statements(self, *, consume: Iterable[str], produce: Iterable[str],
                          groups: Iterable[str]) -> list[iam.PolicyStatement]:
        """What a worker needs: read ``consume`` as one of ``groups``, write ``produce`` (idempotently). A statement
        with nothing to name (no topic to read: every topic is some tenant's own) is left out."""
        reads = [self.topic_arn(t) for t in sorted(set(consume))]
        writes = [self.topic_arn(t) for t in sorted(set(produce))]
        group_arns = [self.group_arn(g) for g in sorted(set(groups))]
        statements = [
            (["kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"], [self.cluster_arn]),
            (["kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"], reads),
            (["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"], writes),
            (["kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup"], group_arns),
        ]
        return [iam.PolicyStatement(actions=actions, resources=resources) for actions, resources in statements
                if resources]

    def grant_create_topics(self, grantee: iam.IGrantable, topics: Iterable[str]) -> None:
        self._grant(grantee, ["kafka-cluster:Connect"], [self.cluster_arn])
        self._grant(grantee, ["kafka-cluster:DescribeTopic", "kafka-cluster:CreateTopic"],
                    [self.topic_arn(t) for t in sorted(set(topics))])
