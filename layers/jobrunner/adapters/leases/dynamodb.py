"""LeaseStore on DynamoDB (moto's server locally).

Table layout (key: ``segment`` N, ``minute`` N):
- ``minute = 0``: the segment's summary item: ``watermark`` (epoch ms of the last fully scanned
  minute), ``last_heartbeat``, ``last_owner``, ``published_total``, and ``parked`` (a number set:
  the epoch ms of the partitions set aside after failing again and again, until they are done).
- ``minute = <epoch ms>``: one item per scanned partition: ``owner``, ``lease_expires`` (epoch ms),
  ``done``, ``published``, ``attempts`` (successful acquires), ``progress`` (the scan's position in its
  PLANNED lane, kept at each renewal), and ``expires_at`` (epoch s, the
  table's TTL attribute) for clean-up. A parked partition is leased again at least every backoff cap
  (far less than the 3 days it is kept), so its item does not expire while it is parked.
- ``segment = -1, minute = 0``: the table's own item: ``highest_segment_count``, only ever raised.
- ``segment = -2, minute = 0``: the reconciler's item: ``reconciler_state`` (its progress, opaque text;
  ``ports.ReconcilerStateStore``); ``segment = -2, minute = 60000``: its lease, a partition item as above.
All lease changes are conditional writes, so two scans can never both hold one partition. Every
botocore error (other than a refused condition, which is an answer) becomes ``Unavailable``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from jobrunner.adapters.dynamodb_tables import create_if_missing
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.time import from_epoch_ms, to_epoch_ms
from jobrunner.ports import (
    MAX_RECONCILER_STATE,
    RECONCILER_SEGMENT,
    RELEASED,
    LeaseStore,
    PartitionState,
    ReconcilerStateStore,
    SegmentState,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from datetime import datetime

SUMMARY = 0
#: The key (``segment``) of the table's own item, which no segment can have.
TABLE_ITEM = -1
#: The key (``segment``) of the reconciler's items (its state, ``ReconcilerStateStore``; its lease), which no segment
#: can have either.
RECONCILER_ITEM = RECONCILER_SEGMENT
KEEP_PARTITION_ITEMS_S = 3 * 24 * 3600
#: BatchGetItem calls that may leave keys unprocessed (throttling) before the read gives up.
BATCH_GET_ATTEMPTS = 8
BATCH_GET_BACKOFF_S = 0.05
BATCH_GET_BACKOFF_CAP_S = 1.0


def _n(value: int | float) -> dict[str, str]:
    return {"N": str(int(value))}


def _conditional_failed(exc: ClientError) -> bool:
    code: str = exc.response.get("Error", {}).get("Code", "")
    return code == "ConditionalCheckFailedException"


class DynamoDBLeaseStore(LeaseStore, ReconcilerStateStore):
    def __init__(
        self, table_name: str, dynamodb_client: Any, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._table = table_name
        self._client = dynamodb_client
        self._sleep = sleep

    def _key(self, segment: int, minute: int) -> dict[str, Any]:
        return {"segment": _n(segment), "minute": _n(minute)}

    def _call(self, operation: str, **kwargs: Any) -> Any:
        """One DynamoDB operation on the table; a refused condition propagates as ClientError."""
        try:
            return getattr(self._client, operation)(TableName=self._table, **kwargs)
        except ClientError as exc:
            if _conditional_failed(exc):
                raise
            raise Unavailable(f"heartbeat table: {exc}") from exc
        except BotoCoreError as exc:
            raise Unavailable(f"heartbeat table: {exc}") from exc

    def _conditional_update(self, **kwargs: Any) -> bool:
        try:
            self._call("update_item", **kwargs)
        except ClientError:  # only a refused condition gets here
            return False
        return True

    def acquire(self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float) -> bool:
        now_ms = to_epoch_ms(now)
        return self._conditional_update(
            Key=self._key(segment, to_epoch_ms(bucket)),
            UpdateExpression="SET #o = :o, #d = :f, lease_expires = :e, expires_at = :x, started_at = :now"
            " ADD attempts :one",
            ConditionExpression="attribute_not_exists(#d) OR (#d = :f AND"
            " (attribute_not_exists(lease_expires) OR lease_expires <= :now OR #o = :o))",
            ExpressionAttributeNames={"#o": "owner", "#d": "done"},
            ExpressionAttributeValues={
                ":o": {"S": owner}, ":e": _n(now_ms + ttl_s * 1000), ":now": _n(now_ms),
                ":x": _n(now_ms // 1000 + KEEP_PARTITION_ITEMS_S), ":f": {"BOOL": False},
                ":one": _n(1),
            },
        )

    def renew(
        self, segment: int, bucket: datetime, owner: str, now: datetime, ttl_s: float, progress: str | None = None
    ) -> bool:
        return self._set_lease(segment, bucket, owner, to_epoch_ms(now) + ttl_s * 1000, progress)

    def release(
        self, segment: int, bucket: datetime, owner: str, now: datetime, progress: str | None = None
    ) -> bool:
        return self._set_lease(segment, bucket, owner, to_epoch_ms(RELEASED), progress, attempts=-1)

    def _set_lease(self, segment: int, bucket: datetime, owner: str, expires_ms: float, progress: str | None,
                   attempts: int = 0) -> bool:
        """The owner's lease of a partition not done: expires at ``expires_ms``, keeps ``progress`` if given,
        and counts ``attempts`` more (a release gives its attempt back)."""
        values: dict[str, Any] = {":o": {"S": owner}, ":e": _n(expires_ms), ":f": {"BOOL": False}}
        update = "SET lease_expires = :e"
        if progress is not None:
            update += ", progress = :g"
            values[":g"] = {"S": progress}
        if attempts:
            update += " ADD attempts :a"
            values[":a"] = _n(attempts)
        return self._conditional_update(
            Key=self._key(segment, to_epoch_ms(bucket)),
            UpdateExpression=update,
            ConditionExpression="#o = :o AND #d = :f",
            ExpressionAttributeNames={"#o": "owner", "#d": "done"},
            ExpressionAttributeValues=values,
        )

    def mark_done(self, segment: int, bucket: datetime, owner: str, now: datetime, published: int) -> bool:
        return self._conditional_update(
            Key=self._key(segment, to_epoch_ms(bucket)),
            UpdateExpression="SET #d = :t, published = :p, finished_at = :now",
            ConditionExpression="#o = :o",
            ExpressionAttributeNames={"#o": "owner", "#d": "done"},
            ExpressionAttributeValues={
                ":o": {"S": owner}, ":t": {"BOOL": True}, ":p": _n(published), ":now": _n(to_epoch_ms(now)),
            },
        )

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # BatchGetItem refuses a request that names one key twice.
        keys = list({(k["segment"]["N"], k["minute"]["N"]): k for k in keys}.values())
        items: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {self._table: {"Keys": keys[start:start + 100], "ConsistentRead": True}}
            for attempt in range(BATCH_GET_ATTEMPTS):
                if attempt:  # keys left unprocessed: the table is throttling us, so back off
                    self._sleep(min(BATCH_GET_BACKOFF_CAP_S, BATCH_GET_BACKOFF_S * 2 ** (attempt - 1)))
                try:
                    response = self._client.batch_get_item(RequestItems=request)
                except (ClientError, BotoCoreError) as exc:
                    raise Unavailable(f"heartbeat table: {exc}") from exc
                items += response.get("Responses", {}).get(self._table, [])
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise Unavailable(f"heartbeat table: keys still unprocessed after {BATCH_GET_ATTEMPTS} reads")
        return items

    def segments(self, segments: Iterable[int]) -> list[SegmentState]:
        items = self._batch_get([self._key(s, SUMMARY) for s in segments])
        states = [
            SegmentState(
                segment=int(item["segment"]["N"]),
                watermark=from_epoch_ms(int(item["watermark"]["N"])) if "watermark" in item else None,
                last_heartbeat=(
                    from_epoch_ms(int(item["last_heartbeat"]["N"])) if "last_heartbeat" in item else None
                ),
                last_owner=item.get("last_owner", {}).get("S"),
                published_total=int(item.get("published_total", {}).get("N", "0")),
                parked=frozenset(from_epoch_ms(int(ms)) for ms in item.get("parked", {}).get("NS", [])),
            )
            for item in items
        ]
        return sorted(states, key=lambda s: s.segment)

    def partitions(self, keys: Iterable[tuple[int, datetime]]) -> list[PartitionState]:
        items = self._batch_get([self._key(s, to_epoch_ms(b)) for s, b in keys])
        return [
            PartitionState(
                segment=int(item["segment"]["N"]),
                bucket=from_epoch_ms(int(item["minute"]["N"])),
                owner=item.get("owner", {}).get("S"),
                lease_expires_at=(
                    from_epoch_ms(int(item["lease_expires"]["N"])) if "lease_expires" in item else None
                ),
                done=bool(item.get("done", {}).get("BOOL", False)),
                published=int(item.get("published", {}).get("N", "0")),
                attempts=int(item.get("attempts", {}).get("N", "0")),
                progress=item.get("progress", {}).get("S"),
            )
            for item in items
        ]

    def advance_watermark(self, segment: int, bucket: datetime) -> None:
        self._conditional_update(
            Key=self._key(segment, SUMMARY),
            UpdateExpression="SET watermark = :w",
            ConditionExpression="attribute_not_exists(watermark) OR watermark < :w",
            ExpressionAttributeValues={":w": _n(to_epoch_ms(bucket))},
        )

    def beat(self, segment: int, owner: str, now: datetime, published: int) -> None:
        self._conditional_update(
            Key=self._key(segment, SUMMARY),
            UpdateExpression="SET last_heartbeat = :now, last_owner = :o ADD published_total :p",
            ExpressionAttributeValues={":now": _n(to_epoch_ms(now)), ":o": {"S": owner}, ":p": _n(published)},
        )

    def park(self, segment: int, buckets: Iterable[datetime]) -> None:
        parked = sorted({str(to_epoch_ms(b)) for b in buckets})
        if parked:
            self._conditional_update(
                Key=self._key(segment, SUMMARY), UpdateExpression="ADD parked :b",
                ExpressionAttributeValues={":b": {"NS": parked}},
            )

    def unpark(self, segment: int, buckets: Iterable[datetime]) -> None:
        parked = sorted({str(to_epoch_ms(b)) for b in buckets})
        if parked:  # the condition: an update would otherwise create the summary of a segment never seen
            self._conditional_update(
                Key=self._key(segment, SUMMARY), UpdateExpression="DELETE parked :b",
                ConditionExpression="attribute_exists(parked)", ExpressionAttributeValues={":b": {"NS": parked}},
            )

    def record_segment_count(self, count: int) -> int:
        key = self._key(TABLE_ITEM, SUMMARY)
        for _ in range(3):  # a concurrent raise can refuse ours: read again (it only ever moves up)
            item = self._call("get_item", Key=key, ConsistentRead=True).get("Item") or {}
            highest = int(item.get("highest_segment_count", {}).get("N", "0"))
            if highest >= count:
                return highest
            if self._conditional_update(
                Key=key, UpdateExpression="SET highest_segment_count = :n",
                ConditionExpression="attribute_not_exists(highest_segment_count) OR highest_segment_count < :n",
                ExpressionAttributeValues={":n": _n(count)},
            ):
                return count
        raise Unavailable("heartbeat table: the segment count on record kept changing")


    def load_reconciler_state(self) -> str | None:
        item = self._call("get_item", Key=self._key(RECONCILER_ITEM, SUMMARY), ConsistentRead=True).get("Item") or {}
        state: str | None = item.get("reconciler_state", {}).get("S")
        return state

    def save_reconciler_state(self, state: str) -> None:
        if len(state.encode()) > MAX_RECONCILER_STATE:
            raise ValueError(f"reconciler state of {len(state.encode())} bytes; at most {MAX_RECONCILER_STATE}")
        self._call("update_item", Key=self._key(RECONCILER_ITEM, SUMMARY), UpdateExpression="SET reconciler_state = :s",
                   ExpressionAttributeValues={":s": {"S": state}})


def ensure_table(dynamodb_client: Any, table_name: str) -> None:
    """Create the heartbeat table when missing (the local stack; in AWS the CDK app owns it)."""
    create_if_missing(dynamodb_client, table_name, ("segment", "N"), ("minute", "N"))
