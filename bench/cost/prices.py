"""The unit prices the cost model uses: one dated table, each price with its unit and where it came from.

All are us-east-1 list prices without free tiers or volume discounts. AWS's pricing pages render
their tables in the browser, so most figures could not be read from them here: each says so in its
``source`` and carries the date it was last checked. Re-verify before relying on a figure.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

REGION = "us-east-1"
#: The day the figures below were taken from their sources.
CHECKED = "2026-11-28"
_DOCS = f"as stated in docs/scaling.md (written 2026-11-22) on {CHECKED}, to re-verify"
_ISSUE = f"as stated in issue #33's recomputation on {CHECKED}, to re-verify"
_THIRD_PARTY = (f"not read from the AWS page; as several 2026 third-party pricing guides give it (e.g. "
                "cloudburn.io/blog/aws-nat-gateway-pricing, basavytix.com/blog/aws-nat-gateway-pricing), read on "
                f"{CHECKED}, to re-verify")
_RECALLED = f"AWS list price as recalled on {CHECKED}, not read from the pricing page, to re-verify"


class Price(BaseModel):
    """One unit price."""

    model_config = ConfigDict(frozen=True)

    value: float
    unit: str
    region: str = REGION
    source: str
    checked: str = CHECKED


class PriceTable(BaseModel):
    """Every unit price the model multiplies by (USD)."""

    model_config = ConfigDict(frozen=True)

    keyspaces_write_request: Price
    keyspaces_read_request: Price
    keyspaces_wcu_hour: Price
    keyspaces_rcu_hour: Price
    keyspaces_ttl_delete: Price
    keyspaces_storage: Price
    keyspaces_pitr: Price
    dynamodb_write_request: Price
    dynamodb_read_request: Price
    lambda_gb_second: Price
    lambda_request: Price
    lambda_kafka_epu_hour: Price
    api_gateway_rest_request: Price
    msk_serverless_cluster_hour: Price
    msk_serverless_partition_hour: Price
    msk_serverless_gb_in: Price
    msk_serverless_gb_out: Price
    msk_broker_hour_t3_small: Price
    msk_broker_hour_m7g_large: Price
    msk_broker_storage: Price
    vpc_endpoint_zone_hour: Price
    vpc_endpoint_gb: Price
    logs_ingested_gb: Price
    logs_stored_gb_month: Price
    xray_trace_recorded: Price
    cloudwatch_custom_metric: Price
    cloudwatch_alarm: Price
    cloudwatch_dashboard: Price
    secrets_manager_secret: Price
    waf_web_acl_month: Price
    waf_rule_month: Price
    waf_request: Price
    eventbridge_scheduler_invocation: Price
    nat_gateway_hour: Price
    nat_gateway_gb: Price
    public_ipv4_hour: Price


PER_MILLION = 1e-6

PRICES = PriceTable(
    keyspaces_write_request=Price(
        value=0.625 * PER_MILLION, unit="write request unit (1 KB)",
        source=f"https://aws.amazon.com/keyspaces/pricing/ — $0.625 per million WRU, {_DOCS}"),
    keyspaces_read_request=Price(
        value=0.125 * PER_MILLION, unit="read request unit (4 KB, LOCAL_QUORUM)",
        source=f"https://aws.amazon.com/keyspaces/pricing/ — $0.125 per million RRU, {_DOCS}"),
    keyspaces_wcu_hour=Price(
        value=0.00065, unit="provisioned WCU-hour",
        source=f"https://aws.amazon.com/keyspaces/pricing/ — {_ISSUE} (docs/scaling.md's $0.00075 is 15 % high)"),
    keyspaces_rcu_hour=Price(
        value=0.00013, unit="provisioned RCU-hour",
        source=f"https://aws.amazon.com/keyspaces/pricing/ — {_ISSUE} (docs/scaling.md's $0.00015 is 15 % high)"),
    keyspaces_ttl_delete=Price(
        value=0.275 * PER_MILLION, unit="TTL delete (row up to 1 KB)",
        source=f"https://aws.amazon.com/keyspaces/pricing/ — {_ISSUE} (docs/scaling.md's $0.355 is 29 % high: "
               "$0.355 / 1.29)"),
    keyspaces_storage=Price(
        value=0.25, unit="GB-month stored",
        source=f"https://aws.amazon.com/keyspaces/pricing/ — {_RECALLED}"),
    keyspaces_pitr=Price(
        value=0.20, unit="GB-month of point-in-time recovery",
        source=f"https://aws.amazon.com/keyspaces/pricing/ — {_RECALLED}"),
    dynamodb_write_request=Price(
        value=0.625 * PER_MILLION, unit="on-demand write request unit",
        source=f"https://aws.amazon.com/dynamodb/pricing/on-demand/ — {_DOCS}"),
    dynamodb_read_request=Price(
        value=0.125 * PER_MILLION, unit="on-demand read request unit",
        source=f"https://aws.amazon.com/dynamodb/pricing/on-demand/ — {_DOCS}"),
    lambda_gb_second=Price(
        value=0.0000133334, unit="GB-second (arm64, first tier)",
        source=f"https://aws.amazon.com/lambda/pricing/ — {_DOCS}"),
    lambda_request=Price(
        value=0.20 * PER_MILLION, unit="request",
        source=f"https://aws.amazon.com/lambda/pricing/ — {_DOCS} (the page's worked examples also read $0.20)"),
    lambda_kafka_epu_hour=Price(
        value=0.185, unit="event poller unit-hour (10 Kafka pollers per EPU)",
        source="https://aws.amazon.com/lambda/pricing/ — Provisioned Mode for ESM, pricing example 3 "
               f"(US East (N. Virginia): $0.185 per EPU-hour, 10 event pollers per EPU), read on {CHECKED} "
               "in a stored copy of the page"),
    api_gateway_rest_request=Price(
        value=3.50 * PER_MILLION, unit="REST API request (first tier)",
        source=f"https://aws.amazon.com/api-gateway/pricing/ — {_DOCS}"),
    msk_serverless_cluster_hour=Price(
        value=0.75, unit="MSK Serverless cluster-hour",
        source=f"https://aws.amazon.com/msk/pricing/ — {_DOCS}"),
    msk_serverless_partition_hour=Price(
        value=0.0015, unit="MSK Serverless partition-hour",
        source=f"https://aws.amazon.com/msk/pricing/ — {_DOCS}"),
    msk_serverless_gb_in=Price(
        value=0.10, unit="GB written to MSK Serverless",
        source=f"https://aws.amazon.com/msk/pricing/ — {_DOCS}"),
    msk_serverless_gb_out=Price(
        value=0.05, unit="GB read from MSK Serverless",
        source=f"https://aws.amazon.com/msk/pricing/ — {_DOCS}"),
    msk_broker_hour_t3_small=Price(
        value=0.0456, unit="kafka.t3.small broker-hour",
        source=f"https://aws.amazon.com/msk/pricing/ — {_DOCS}"),
    msk_broker_hour_m7g_large=Price(
        value=0.204, unit="kafka.m7g.large broker-hour",
        source=f"https://aws.amazon.com/msk/pricing/ — {_RECALLED}"),
    msk_broker_storage=Price(
        value=0.10, unit="GB-month of broker storage",
        source=f"https://aws.amazon.com/msk/pricing/ — {_DOCS}"),
    vpc_endpoint_zone_hour=Price(
        value=0.01, unit="interface endpoint-hour per zone",
        source=f"https://aws.amazon.com/privatelink/pricing/ — {_DOCS}"),
    vpc_endpoint_gb=Price(
        value=0.01, unit="GB processed by an interface endpoint (first tier)",
        source=f"https://aws.amazon.com/privatelink/pricing/ — {_RECALLED}"),
    logs_ingested_gb=Price(
        value=0.50, unit="GB of CloudWatch Logs ingested (standard class)",
        source=f"https://aws.amazon.com/cloudwatch/pricing/ — {_RECALLED}; the issue's ≈ $0.32 per million "
               "for one INFO line per execution implies the same"),
    logs_stored_gb_month=Price(
        value=0.03, unit="GB-month of CloudWatch Logs stored",
        source=f"https://aws.amazon.com/cloudwatch/pricing/ — {_RECALLED}"),
    xray_trace_recorded=Price(
        value=5.00 * PER_MILLION, unit="X-Ray trace recorded",
        source=f"https://aws.amazon.com/xray/pricing/ — {_RECALLED}"),
    cloudwatch_custom_metric=Price(
        value=0.30, unit="custom metric-month (first 10,000)",
        source=f"https://aws.amazon.com/cloudwatch/pricing/ — {_RECALLED}"),
    cloudwatch_alarm=Price(
        value=0.10, unit="standard-resolution alarm-month",
        source=f"https://aws.amazon.com/cloudwatch/pricing/ — {_RECALLED}"),
    cloudwatch_dashboard=Price(
        value=3.00, unit="dashboard-month",
        source=f"https://aws.amazon.com/cloudwatch/pricing/ — {_RECALLED}"),
    secrets_manager_secret=Price(
        value=0.40, unit="secret-month",
        source=f"https://aws.amazon.com/secrets-manager/pricing/ — {_RECALLED}"),
    waf_web_acl_month=Price(
        value=5.00, unit="web ACL-month",
        source=f"https://aws.amazon.com/waf/pricing/ — {_RECALLED}; docs/deploy.md, 'Edge protection'"),
    waf_rule_month=Price(
        value=1.00, unit="rule-month",
        source=f"https://aws.amazon.com/waf/pricing/ — {_RECALLED}; docs/deploy.md, 'Edge protection'"),
    waf_request=Price(
        value=0.60 * PER_MILLION, unit="request inspected",
        source=f"https://aws.amazon.com/waf/pricing/ — {_RECALLED}; docs/deploy.md, 'Edge protection'"),
    eventbridge_scheduler_invocation=Price(
        value=1.00 * PER_MILLION, unit="scheduled invocation (after 14 million free a month)",
        source=f"https://aws.amazon.com/eventbridge/pricing/ — {_DOCS}"),
    nat_gateway_hour=Price(
        value=0.045, unit="NAT gateway-hour",
        source=f"https://aws.amazon.com/vpc/pricing/ — $0.045 per NAT gateway-hour, {_THIRD_PARTY}"),
    nat_gateway_gb=Price(
        value=0.045, unit="GB processed by a NAT gateway (either direction)",
        source=f"https://aws.amazon.com/vpc/pricing/ — $0.045 per GB processed, {_THIRD_PARTY}"),
    public_ipv4_hour=Price(
        value=0.005, unit="public IPv4 address-hour (a NAT gateway's Elastic IP)",
        source=f"https://aws.amazon.com/vpc/pricing/ — $0.005 per public IPv4 address-hour, {_THIRD_PARTY}"),
)
