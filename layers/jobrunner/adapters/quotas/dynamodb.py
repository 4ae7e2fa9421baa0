"""TenantQuotas on DynamoDB (moto's server locally).

Table layout (key: ``tenant`` S, ``window`` N), three kinds of item per tenant:
- a rate window (``window`` > 0, its epoch second): ``admitted`` (how many were admitted in it) and
  ``expires_at`` (epoch s, the table's TTL attribute: a window is kept an hour after it starts). An
  admission is one ``UpdateItem`` that adds 1 under the condition that fewer than the limit were
  admitted, so racing callers never get past the limit together;
- the standing counts (``window`` 0): ``jobs``, ``per_minute``, ``peak``, ``until`` (``domain.limits.
  Standing``) and ``rev``, a revision every write of the item raises;
- a minute of one-time fires (``window`` = minus the minute's epoch second): ``fires`` and
  ``expires_at`` (an hour after the minute);
- a create counted under its key (``take(key=...)``, the job's id): partition ``<tenant>/created/<key>``,
  ``window`` 0, ``counted`` (1 while counted, 0 once given back) and ``expires_at`` (a day after the take,
  the lifetime of an idempotency key). It is written in the take's transaction and the give-back's, on
  condition of its own value, so a key counts once however often it is taken or given back. Only updates
  (no put or delete): what the API's role may do with the table.

A take reads the standing item and the minute's item, works the counts out (``domain.limits.apply``)
and writes both in one transaction (the standing item alone: one conditional ``UpdateItem``), on
condition that neither changed since the read (the standing item's ``rev``, the minute's ``fires``); a
lost race reads again. Racing takes of one tenant are so
applied one after the other.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from jobrunner.adapters.dynamodb_tables import create_if_missing
from jobrunner.domain.errors import Unavailable
from jobrunner.domain.limits import QuotaChange, Standing, apply
from jobrunner.ports import TenantQuotas

if TYPE_CHECKING:
    from jobrunner.domain.limits import Limits

log = logging.getLogger(__name__)

#: How long a window's item is kept after the window starts (then DynamoDB's TTL removes it).
KEEP_WINDOW_S = 3600
#: Reads and conditional writes one take tries before it reports the counter unavailable.
MAX_TAKE_ATTEMPTS = 20
#: How long a create's key is remembered (``take(key=...)``): as long as an idempotency key lives.
KEEP_KEY_S = 86_400
_STANDING = 0


class DynamoDBTenantQuotas(TenantQuotas):
    def __init__(self, table_name: str, dynamodb_client: Any) -> None:
        self._table = table_name
        self._client = dynamodb_client

    def admit(self, tenant: str, window: int, limit: int, count: int = 1) -> bool:
        if count > limit:
            return False
        try:
            self._client.update_item(
                TableName=self._table, Key={"tenant": {"S": tenant}, "window": {"N": str(window)}},
                UpdateExpression="ADD admitted :count SET expires_at = if_not_exists(expires_at, :expires)",
                ConditionExpression="attribute_not_exists(admitted) OR admitted <= :room",
                ExpressionAttributeValues={":count": {"N": str(count)}, ":room": {"N": str(limit - count)},
                                           ":expires": {"N": str(int(time.time()) + KEEP_WINDOW_S)}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise Unavailable(f"quota table: {exc}") from exc
        except BotoCoreError as exc:
            raise Unavailable(f"quota table: {exc}") from exc
        return True

    def take(self, tenant: str, change: QuotaChange, limits: Limits, now_minute: int,
             key: str | None = None) -> str | None:
        try:
            for attempt in range(MAX_TAKE_ATTEMPTS):
                if key is not None and self._counted(tenant, key):
                    return None
                written, refused = self._take_once(tenant, change, limits, now_minute, key)
                if written or refused is not None:
                    if written:
                        self._drop_quietly(tenant, change.drop_minute)
                    return refused
                time.sleep(random.uniform(0, 0.005 * (attempt + 1)))  # a racing take of this tenant won
        except (ClientError, BotoCoreError) as exc:
            raise Unavailable(f"quota table: {exc}") from exc
        raise Unavailable(f"quota table: the counts of tenant {tenant!r} kept changing ({MAX_TAKE_ATTEMPTS} tries)")

    def _take_once(self, tenant: str, change: QuotaChange, limits: Limits, now_minute: int,
                   key: str | None) -> tuple[bool, str | None]:
        """One read and conditional write: (written, the limit refused); neither when a race was lost."""
        item = self._get(tenant, _STANDING, "jobs, per_minute, peak, #until, rev")
        before = Standing(*(int(item.get(name, {"N": "0"})["N"]) for name in ("jobs", "per_minute", "peak", "until")))
        minute = change.add_minute
        count = int(self._get(tenant, -minute, "fires").get("fires", {"N": "0"})["N"]) if minute is not None else 0
        refused, after, count = apply(before, count, change, limits, now_minute)
        if refused is not None:
            return False, refused
        rev = item.get("rev", {"N": "0"})["N"]
        writes: list[dict[str, Any]] = [{"Update": {
            "TableName": self._table, "Key": self._key(tenant, _STANDING),
            "UpdateExpression": "SET jobs = :jobs, per_minute = :per_minute, peak = :peak, #until = :until, "
                                "rev = :next",
            "ConditionExpression": "attribute_not_exists(rev) OR rev = :rev",
            "ExpressionAttributeNames": {"#until": "until"},
            "ExpressionAttributeValues": {
                ":jobs": _n(after.jobs), ":per_minute": _n(after.per_minute), ":peak": _n(after.peak),
                ":until": _n(after.until), ":rev": {"N": rev}, ":next": _n(int(rev) + 1)},
        }}]
        if minute is not None:
            writes.append({"Update": {
                "TableName": self._table, "Key": self._key(tenant, -minute),
                "UpdateExpression": "SET fires = :fires, expires_at = :expires",
                "ConditionExpression": "attribute_not_exists(fires) OR fires = :before",
                "ExpressionAttributeValues": {":fires": _n(count), ":before": _n(count - change.fires),
                                              ":expires": _n(minute + KEEP_WINDOW_S)},
            }})
        if key is not None:
            writes.append(self._mark(tenant, key, counted=True))
        try:
            if len(writes) == 1:  # the counts alone: one conditional write (a transaction bills twice)
                self._client.update_item(**writes[0]["Update"])
            else:
                self._client.transact_write_items(TransactItems=writes)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("TransactionCanceledException",
                                                             "ConditionalCheckFailedException"):
                return False, None
            raise
        return True, None

    def give_back(self, tenant: str, change: QuotaChange, key: str | None = None) -> None:
        undo = change.inverse()
        try:
            standing = key is not None or undo.jobs or undo.per_minute
            if standing and not self._give_back_standing(tenant, undo, key):
                return  # a key not counted: nothing to give back
            if undo.add_minute is not None:  # the minute a move left: its one fire back
                self._client.update_item(
                    TableName=self._table, Key=self._key(tenant, -undo.add_minute), UpdateExpression="ADD fires :one",
                    ExpressionAttributeValues={":one": _n(1)})
            self._drop(tenant, undo.drop_minute, change.fires)
        except (ClientError, BotoCoreError) as exc:
            raise Unavailable(f"quota table: {exc}") from exc

    def _give_back_standing(self, tenant: str, undo: QuotaChange, key: str | None) -> bool:
        """Add ``undo``'s jobs and per-minute fires to the standing counts, never below zero (a change given back
        twice, by a request and its retry, must not leave room the tenant never had): read, then a conditional
        write on the revision, as a take does; under ``key``, only while the key is counted, and with the key
        marked given back in the same transaction. False when the key was not counted (nothing changed)."""
        for attempt in range(MAX_TAKE_ATTEMPTS):
            if key is not None and not self._counted(tenant, key):
                return False
            item = self._get(tenant, _STANDING, "jobs, per_minute, rev")
            jobs, per_minute = (int(item.get(name, {"N": "0"})["N"]) for name in ("jobs", "per_minute"))
            rev = item.get("rev", {"N": "0"})["N"]
            counts = {
                "TableName": self._table, "Key": self._key(tenant, _STANDING),
                "UpdateExpression": "SET jobs = :jobs, per_minute = :per_minute, rev = :next",
                "ConditionExpression": "attribute_not_exists(rev) OR rev = :rev",
                "ExpressionAttributeValues": {":jobs": _n(max(0, jobs + undo.jobs)),
                                              ":per_minute": _n(max(0, per_minute + undo.per_minute)),
                                              ":rev": {"N": rev}, ":next": _n(int(rev) + 1)}}
            try:
                if key is None:
                    self._client.update_item(**counts)
                else:
                    self._client.transact_write_items(TransactItems=[
                        {"Update": counts}, self._mark(tenant, key, counted=False)])
                return True
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("TransactionCanceledException",
                                                                     "ConditionalCheckFailedException"):
                    raise
            time.sleep(random.uniform(0, 0.005 * (attempt + 1)))  # a racing write of this tenant's counts won
        raise Unavailable(f"quota table: the counts of tenant {tenant!r} kept changing ({MAX_TAKE_ATTEMPTS} tries)")

    def _counted(self, tenant: str, key: str) -> bool:
        """Whether the create under ``key`` is counted (its item says so)."""
        item = self._get(f"{tenant}/created/{key}", _STANDING, "counted")
        return int(item.get("counted", {"N": "0"})["N"]) == 1

    def _mark(self, tenant: str, key: str, *, counted: bool) -> dict[str, Any]:
        """The transaction item that marks the create under ``key`` counted (on condition it is not) or given
        back (on condition it is)."""
        return {"Update": {
            "TableName": self._table, "Key": self._key(f"{tenant}/created/{key}", _STANDING),
            "UpdateExpression": "SET #counted = :now, expires_at = :expires",
            "ConditionExpression": ("attribute_not_exists(#counted) OR #counted = :was" if counted
                                    else "#counted = :was"),
            "ExpressionAttributeNames": {"#counted": "counted"},
            "ExpressionAttributeValues": {":now": _n(int(counted)), ":was": _n(int(not counted)),
                                          ":expires": _n(int(time.time()) + KEEP_KEY_S)},
        }}

    def _drop_quietly(self, tenant: str, minute: int | None) -> None:
        """Give a minute's fire back, best effort: left counted, the minute can only refuse more."""
        try:
            self._drop(tenant, minute)
        except (ClientError, BotoCoreError) as exc:
            log.warning("quota table: minute %s of tenant %r stays counted one fire too high: %s", minute, tenant, exc)

    def _drop(self, tenant: str, minute: int | None, fires: int = 1) -> None:
        if minute is None:
            return
        try:
            self._client.update_item(
                TableName=self._table, Key=self._key(tenant, -minute), UpdateExpression="ADD fires :less",
                ConditionExpression="fires >= :fires",
                ExpressionAttributeValues={":less": _n(-fires), ":fires": _n(fires)})
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def _get(self, tenant: str, window: int, attributes: str) -> dict[str, Any]:
        """The item's ``attributes`` (named: an IAM policy may allow these only), read consistently."""
        names = {"#until": "until"} if "#until" in attributes else {}
        extra = {"ExpressionAttributeNames": names} if names else {}
        answer = self._client.get_item(TableName=self._table, Key=self._key(tenant, window), ConsistentRead=True,
                                       ProjectionExpression=attributes, **extra)
        item: dict[str, Any] = answer.get("Item", {})
        return item

    @staticmethod
    def _key(tenant: str, window: int) -> dict[str, Any]:
        return {"tenant": {"S": tenant}, "window": {"N": str(window)}}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def ensure_table(dynamodb_client: Any, table_name: str) -> None:
    """Create the quota table when missing (the local stack; in AWS the CDK app owns it)."""
    create_if_missing(dynamodb_client, table_name, ("tenant", "S"), ("window", "N"))
