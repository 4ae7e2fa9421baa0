"""Creating an adapter's DynamoDB table when it is missing: the local stack and the tests (in AWS the CDK
app owns every table). Shared by the heartbeat and quota adapters, which each name their own key."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError


def create_if_missing(dynamodb_client: Any, table_name: str, partition_key: tuple[str, str],
                      sort_key: tuple[str, str]) -> None:
    """Create ``table_name`` on demand with (name, type) keys, e.g. ``("segment", "N")``, and wait for it."""
    try:
        dynamodb_client.describe_table(TableName=table_name)
        return
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
    keys = ((partition_key, "HASH"), (sort_key, "RANGE"))
    dynamodb_client.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": name, "KeyType": kind} for (name, _), kind in keys],
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": type_} for (name, type_), _ in keys],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb_client.get_waiter("table_exists").wait(TableName=table_name)
