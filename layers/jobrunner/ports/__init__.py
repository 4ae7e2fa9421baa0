"""The ports: every interface the services need from the outside world, with its contract.

One module per concern: ``clock``, ``stores`` (the jobs, scheduled rows, history and idempotency keys),
``publishing``, ``leases``, ``reconciler``, ``changes``, ``calendars``, ``quotas``, ``invoking``, ``delivering``.
Every public name is handed on here, so a reader imports ``from jobrunner.ports import X`` whatever module ``X``
lives in.

Adapters live in ``jobrunner.adapters.<kind>.<backend>``; each has an in-memory twin, and the
contract tests in ``tests/contract`` run the same assertions against both.
"""

from __future__ import annotations

from jobrunner.ports.calendars import CalendarStore
from jobrunner.ports.changes import ChangeLog
from jobrunner.ports.clock import Clock
from jobrunner.ports.delivering import (
    MAX_ANSWER_BYTES,
    AddressRefused,
    Answered,
    AwsRefused,
    ConnectionFailed,
    Deliverer,
    DeliveryCall,
    DeliveryResult,
    Invoked,
    Sent,
    TimedOut,
    WebhookSecrets,
)
from jobrunner.ports.invoking import Invoker, ScanRequest
from jobrunner.ports.leases import RELEASED, LeaseStore, PartitionState, SegmentState
from jobrunner.ports.publishing import OutboundMessage, Publisher, PublishError
from jobrunner.ports.quotas import TenantQuotas
from jobrunner.ports.reconciler import (
    MAX_RECONCILER_STATE,
    RECONCILER_LEASE,
    RECONCILER_SEGMENT,
    ReconcilerStateStore,
)
from jobrunner.ports.stores import (
    Completion,
    HistoryStore,
    IdempotencyClaim,
    IdempotencyStore,
    JobStore,
    Outcome,
    RecordKey,
    ScheduledRowStore,
    Stores,
)

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_RECONCILER_STATE",
    "RECONCILER_LEASE",
    "RECONCILER_SEGMENT",
    "RELEASED",
    "AddressRefused",
    "Answered",
    "AwsRefused",
    "CalendarStore",
    "ChangeLog",
    "Clock",
    "Completion",
    "ConnectionFailed",
    "Deliverer",
    "DeliveryCall",
    "DeliveryResult",
    "HistoryStore",
    "IdempotencyClaim",
    "IdempotencyStore",
    "Invoked",
    "Invoker",
    "JobStore",
    "LeaseStore",
    "OutboundMessage",
    "Outcome",
    "PartitionState",
    "PublishError",
    "Publisher",
    "ReconcilerStateStore",
    "RecordKey",
    "ScanRequest",
    "ScheduledRowStore",
    "SegmentState",
    "Sent",
    "Stores",
    "TenantQuotas",
    "TimedOut",
    "WebhookSecrets",
]
