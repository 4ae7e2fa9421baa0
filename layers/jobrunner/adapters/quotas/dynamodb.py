"""TenantQuotas on DynamoDB (moto's server locally).

Table layout (key: ``tenant`` S, ``window`` N): one item per tenant and window, ``admitted`` (how many
were admitted in it) and ``expires_at`` (epoch s, the table's TTL attribute: a window is kept an hour
after it starts). An admission is one ``UpdateItem`` that adds 1 under the condition that fewer than the
limit were admitted, so racing callers never get past the limit together.
"""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobrunner.adapters.dynamodb_tables import create_if_missing
from jobrunner.domain.errors import Unavailable
from jobrunner.ports import TenantQuotas

#: How long a window's item is kept after the window starts (then DynamoDB's TTL removes it).
KEEP_WINDOW_S = 3600


class DynamoDBTenantQuotas(TenantQuotas):
    def __init__(self, table_name: str, dynamodb_client: Any) -> None:
        self._table = table_name
        self._client = dynamodb_client

    def admit(self, tenant: str, window: int, limit: int) -> bool:
        try:
            self._client.update_item(
                TableName=self._table, Key={"tenant": {"S": tenant}, "window": {"N": str(window)}},
                UpdateExpression="ADD admitted :one SET expires_at = if_not_exists(expires_at, :expires)",
                ConditionExpression="attribute_not_exists(admitted) OR admitted < :limit",
                ExpressionAttributeValues={":one": {"N": "1"}, ":limit": {"N": str(limit)},
                                           ":expires": {"N": str(int(time.time()) + KEEP_WINDOW_S)}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise Unavailable(f"quota table: {exc}") from exc
        except BotoCoreError as exc:
            raise Unavailable(f"quota table: {exc}") from exc
        return True


def ensure_table(dynamodb_client: Any, table_name: str) -> None:
    """Create the quota table when missing (the local stack; in AWS the CDK app owns it)."""
    create_if_missing(dynamodb_client, table_name, ("tenant", "S"), ("window", "N"))
