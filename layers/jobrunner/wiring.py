"""Builds the services from settings: the one place adapters are chosen and clients created.

Nothing connects at import time; each client is created on first use and then reused (a Lambda
execution environment keeps it across invocations). Every AWS client gets its service's ``CLIENT_BUDGETS``.
An adapter is either given (tests, the local stack) or chosen by the settings, and its module is imported
the one way ``ADAPTER_MODULES`` says: on first use, or at a function's init (``load_adapters``).
"""

from __future__ import annotations

import functools
import importlib
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobrunner import telemetry
from jobrunner.adapters import secrets
from jobrunner.adapters.clocks.system import SystemClock
from jobrunner.api.tenancy import Tenancy
from jobrunner.config import Settings
from jobrunner.delivery_wiring import DELIVERY_ADAPTER_MODULES, DeliveryAdapters
from jobrunner.ports import ReconcilerStateStore
from jobrunner.services.calendars import CalendarService
from jobrunner.services.delivery import DeliveryRules, DeliveryService
from jobrunner.services.jobs import (
    ChangeBook,
    CountedQuotas,
    JobRules,
    JobService,
    KeptChangeLog,
    NoChangeLog,
    NoQuotas,
    QuotaBook,
)
from jobrunner.services.outcomes import OutcomeRules, Outcomes
from jobrunner.services.reconcile import ReconcileRules, ReconcileService
from jobrunner.services.results import ResultRules, ResultsService
from jobrunner.services.retire import Retirer
from jobrunner.services.scan import ScanRules, ScanService
from jobrunner.services.segments import SegmentService, start_segments
from jobrunner.services.tick import TickRules, TickService
from jobrunner.services.wake import NoWaker, ScanWaker, Waker

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import ModuleType

    from botocore.config import Config
    from cassandra.cluster import Session

    from jobrunner.ports import (
        CalendarStore,
        ChangeLog,
        Clock,
        Deliverer,
        Invoker,
        LeaseStore,
        Publisher,
        Stores,
        TenantQuotas,
        WebhookSecrets,
    )

#: How long a scan with nothing to do waits before it ends, where late writes wake scans.
IDLE_END = timedelta(seconds=3)


@dataclass(frozen=True)
class ClientBudget:
    """How long one call of an AWS client may wait, so that a service out of reach fails the call (and the caller
    falls back: a wake to the next tick, a lease to its renewal) well inside the function's own timeout.

    botocore's defaults wait 60 s to connect and 60 s to read, per attempt: an endpoint that drops packets
    held a wake for minutes (#32). tests/infra/test_client_budgets.py bounds the worst case of each budget
    (every attempt timing out on every address of the endpoint, the longest backoffs) by each function's timeout.
    """

    connect_timeout_s: float
    read_timeout_s: float
    #: Attempts in all, the first included (botocore's ``total_max_attempts``), in botocore's standard mode.
    attempts: int

    def config(self) -> Config:
        from botocore.config import Config

        return Config(connect_timeout=self.connect_timeout_s, read_timeout=self.read_timeout_s,
                      retries={"mode": "standard", "total_max_attempts": self.attempts}, max_pool_connections=64)


#: The budget of each AWS service a function calls, declared once (a client of another service is refused).
#: Endpoints answer in milliseconds; a second's connect covers the slowest handshake in the region. DynamoDB
#: holds the leases and the quota counters: three attempts. A wake is only early (the tick's next dispatch
#: finds the row) and a secret is read once per cold start: two.
CLIENT_BUDGETS: Mapping[str, ClientBudget] = {
    "dynamodb": ClientBudget(connect_timeout_s=1.0, read_timeout_s=3.0, attempts=3),
    "lambda": ClientBudget(connect_timeout_s=1.0, read_timeout_s=2.0, attempts=2),
    "secretsmanager": ClientBudget(connect_timeout_s=1.0, read_timeout_s=2.0, attempts=2),
    # A delivery's call of a target: one attempt (the job's retry policy retries it), and a function invoked
    # synchronously may run as long as an HTTPS target may answer (``domain.targets.model.MAX_TIMEOUT_S``).
    "lambda-targets": ClientBudget(connect_timeout_s=1.0, read_timeout_s=30.0, attempts=1),
    "sqs": ClientBudget(connect_timeout_s=1.0, read_timeout_s=5.0, attempts=1),
}


#: The module of each adapter the container builds from the settings, by what it builds: each is imported when the
#: container first needs it (``adapter``), or at a function's init (``load_adapters``), never at this module's import.
ADAPTER_MODULES: Mapping[str, str] = {
    "session": "jobrunner.adapters.stores.session",
    "store": "jobrunner.adapters.stores.cassandra",
    "changes": "jobrunner.adapters.stores.changes",
    "calendars": "jobrunner.adapters.stores.calendars",
    "publisher": "jobrunner.adapters.publishers.kafka",
    "tracing": "jobrunner.adapters.publishers.tracing",
    "leases": "jobrunner.adapters.leases.dynamodb",
    "quotas": "jobrunner.adapters.quotas.dynamodb",
    "invoker": "jobrunner.adapters.invokers.lambda_",
    **DELIVERY_ADAPTER_MODULES,
}


def adapter(kind: str) -> ModuleType:
    """The module of the ``kind`` adapter (``ADAPTER_MODULES``), imported now if it was not yet."""
    return importlib.import_module(ADAPTER_MODULES[kind])


def load_adapters(*, store: bool = False, publisher: bool = False) -> None:
    """Import the Cassandra store's and the Kafka publisher's modules, and so their drivers, now.

    The container builds its adapters on first use; a handler calls this at import for those its function
    uses, so that it pays for the drivers at init (where Lambda gives the most CPU) rather than on its first
    call, which a scan would pay in lateness. The tick uses neither.
    """
    for kind in (["store"] if store else []) + (["publisher"] if publisher else []):
        adapter(kind)


class Container:
    """Lazily built adapters and services; pass any port to override it (tests, the local stack).

    The store's neighbours on the database (the change log, the calendars) are Cassandra's when the container
    builds its store from the settings, or is given the ``session`` of the store it is given; beside a store given
    without a session (a test double), they are in memory. A given port is always used as it is.

    The services' rules come from the settings. A test varies a rule that no setting names through
    ``scan_rules`` or ``tick_rules`` (applied to the rules the settings give, e.g.
    ``lambda rules: replace(rules, fair_window=5)``), and fixes the outcomes' draw of a retry's jitter with
    ``jitter``; a deployment passes none of them.
    """

    def __init__(
        self, settings: Settings, *, store: Stores | None = None, publisher: Publisher | None = None,
        leases: LeaseStore | None = None, invoker: Invoker | None = None, clock: Clock | None = None,
        quotas: TenantQuotas | None = None, changes: ChangeLog | None = None, calendars: CalendarStore | None = None,
        session: Session | None = None, scan_rules: Callable[[ScanRules], ScanRules] | None = None,
        tick_rules: Callable[[TickRules], TickRules] | None = None, jitter: Callable[[], float] = random.random,
        deliverer: Deliverer | None = None, webhook_secrets: WebhookSecrets | None = None,
    ) -> None:
        self.settings = settings
        #: What the delivery calls targets with and signs with (the API reads and rotates the same secrets).
        self.delivery_adapters = DeliveryAdapters(self, deliverer=deliverer, webhook_secrets=webhook_secrets)
        self._scan_rules = scan_rules
        self._tick_rules = tick_rules
        #: How the outcomes draw a retry's jitter, a fraction of its backoff in [0, 1) (``services.outcomes``).
        self._jitter = jitter
        self._session = session
        #: Whether the change log and the calendars go on a Cassandra session (see the class).
        self._on_cassandra = store is None or session is not None
        self._segments_started = False
        self._calendars = calendars
        self._quotas = quotas
        self._changes = changes
        self._store = store
        self._publisher = publisher
        self._leases = leases
        self._invoker = invoker
        self.clock: Clock = clock or SystemClock()

    @functools.cached_property
    def session(self) -> Session:
        """The Cassandra session of the store and its neighbours: given, or connected from the settings. A container
        given its store without a session has none (``LookupError``): it connects to no database of its own."""
        if self._session is None and not self._on_cassandra:
            raise LookupError("this container was given its store without a session")
        if self._session is None:
            cassandra = self.settings.cassandra
            secrets_client = self.boto3_client("secretsmanager") if cassandra.secret_arn else None
            self._session = adapter("session").connect(cassandra, secrets_client=secrets_client)
        return self._session

    @functools.cached_property
    def store(self) -> Stores:
        """The four store ports (jobs, scheduled rows, history, idempotency keys), on one session."""
        if self._store is None:
            limits = self.settings.tenant_limits
            self._store = adapter("store").CassandraJobStore(
                self.session, history_ttl_s=lambda tenant: limits.of(tenant).history_ttl_s,
                serial_reads=self.settings.cassandra.mode != "keyspaces",
                one_time_rows_expire=self.settings.one_time_rows_expire)
        return self._store

    @functools.cached_property
    def changes(self) -> ChangeLog | None:
        """The jobs' change log: given (tests), on the store's Cassandra session, or in memory beside a store
        given without one (see the class); None when the settings turn it off."""
        if self._changes is None and not self.settings.change_log:
            return None
        if self._changes is None:
            changes = adapter("changes")
            limits = self.settings.tenant_limits
            self._changes = changes.CassandraChangeLog(
                self.session, lambda tenant: limits.of(tenant).history_ttl_s,
            ) if self._on_cassandra else changes.MemoryChangeLog()
        return self._changes

    @functools.cached_property
    def change_book(self) -> ChangeBook:
        """The change log as the services keep it: ``changes``, or ``NoChangeLog`` where there is none."""
        changes = self.changes
        return NoChangeLog() if changes is None else KeptChangeLog(changes, self.clock)

    @functools.cached_property
    def calendars(self) -> CalendarStore:
        """The tenants' calendars: given (tests), on the store's Cassandra session, or in memory beside a store
        given without one (see the class)."""
        if self._calendars is None:
            calendars = adapter("calendars")
            self._calendars = (calendars.CassandraCalendarStore(self.session) if self._on_cassandra
                               else calendars.MemoryCalendarStore())
        return self._calendars

    @functools.cached_property
    def calendar_admin(self) -> CalendarService:
        return CalendarService(self.calendars, self.store, self.clock)

    @functools.cached_property
    def publisher(self) -> Publisher:
        if self._publisher is None:
            self._publisher = adapter("publisher").KafkaPublisher(self.settings.kafka)
        if telemetry.enabled():  # the local stack's option, configured before this is first read
            traced: Publisher = adapter("tracing").TracingPublisher(self._publisher)
            return traced
        return self._publisher

    def boto3_client(self, service: str, *, budget: str | None = None, endpoint: str | None = None) -> Any:
        """A client of ``service`` with its ``CLIENT_BUDGETS`` entry, or the entry ``budget`` names (KeyError: a
        service without one), at ``endpoint`` if given (DynamoDB, Secrets Manager: the settings' endpoint)."""
        import boto3

        config = CLIENT_BUDGETS[budget or service].config()
        endpoint = endpoint or {"dynamodb": self.settings.dynamodb_endpoint,
                                "secretsmanager": self.settings.secrets_endpoint}.get(service)
        return boto3.client(service, region_name=self.settings.region, endpoint_url=endpoint, config=config)

    @functools.cached_property
    def leases(self) -> LeaseStore:
        if self._leases is None:
            self._leases = adapter("leases").DynamoDBLeaseStore(self.settings.heartbeat_table,
                                                                self.boto3_client("dynamodb"))
        return self._leases

    @functools.cached_property
    def quotas(self) -> TenantQuotas | None:
        """The tenants' quota counters: given (tests), or the quota table when some tenant has a limit that
        is counted (a rate, jobs held or executions a minute)."""
        if self._quotas is None and self.settings.tenant_limits.counted:
            self._quotas = adapter("quotas").DynamoDBTenantQuotas(self.settings.quota_table,
                                                                  self.boto3_client("dynamodb"))
        return self._quotas

    @functools.cached_property
    def quota_book(self) -> QuotaBook:
        """The tenants' limits as the services count them: on ``quotas``, or ``NoQuotas`` where there are none."""
        quotas = self.quotas
        return NoQuotas() if quotas is None else CountedQuotas(quotas, self.settings.tenant_limits, self.clock)

    @functools.cached_property
    def invoker(self) -> Invoker:
        if self._invoker is None:
            self._invoker = adapter("invoker").LambdaInvoker(self.settings.scan_function, self.boto3_client("lambda"))
        return self._invoker

    @functools.cached_property
    def waker(self) -> Waker:
        """What the writers of LATE rows wake a partition's scan with (``services.wake``), through the invoker
        given (the local stack, tests) or the scan function where ``JOBRUNNER_WAKE_SCANS`` is set; else
        ``NoWaker``: no wakes, and then no scan ends early either (``ScanRules.idle_end``)."""
        if self._invoker is None and not self.settings.wake_scans:
            return NoWaker()
        return ScanWaker(self.invoker, self.leases, self.clock)

    def start_segments(self) -> int:
        """Start the configured segments and record their count in the heartbeat table, once per container
        (``services.segments.start_segments``); returns the configured count, the one rows are placed with.

        Every service that writes rows (jobs, outcomes, scans, the reconciler) calls it as it is built, before it
        places a row, so the tick scans the segments of a count that any writer used, even one raised and lowered
        again before a tick ran, from the minute the writer first used them. A batch read per cold start; writes
        only when segments are new or the count is raised.
        """
        if not self._segments_started:
            start_segments(self.leases, self.settings.segments, self.clock.now())
            self._segments_started = True
        return self.settings.segments

    @functools.cached_property
    def tenancy(self) -> Tenancy:
        return Tenancy(self.settings.tenant_map, frozenset(self.settings.operators))

    @functools.cached_property
    def jobs(self) -> JobService:
        rules = JobRules(
            segment_count=self.start_segments(),
            topics=self.settings.topic_grants,
            max_payload_bytes=self.settings.max_payload_bytes,
            limits=self.settings.tenant_limits,
            targets=self.settings.target_grants,
            one_time_rows_expire=self.settings.one_time_rows_expire,
        )
        return JobService(self.store, self.clock, rules, waker=self.waker, quotas=self.quota_book,
                          changes=self.change_book, calendars=self.calendars)

    @functools.cached_property
    def ticks(self) -> TickService:
        rules = TickRules(segment_count=self.settings.segments,
                          initial_lookback=timedelta(minutes=self.settings.initial_lookback_minutes))
        if self._tick_rules is not None:
            rules = self._tick_rules(rules)
        return TickService(self.leases, self.invoker, rules)

    @functools.cached_property
    def result_key(self) -> bytes:
        secrets_client = self.boto3_client("secretsmanager") if self.settings.result_key_secret_arn else None
        return secrets.result_key(self.settings, secrets_client)

    @functools.cached_property
    def outcomes(self) -> Outcomes:
        """How executions end, for the results function (a worker's result) and the scans (a timeout)."""
        rules = OutcomeRules(segment_count=self.start_segments(), dead_letter_topic=self.settings.dead_letter_topic)
        return Outcomes(self.store, self.publisher, self.clock, rules, self._jitter, waker=self.waker,
                        retirer=self.retirer)

    @functools.cached_property
    def results(self) -> ResultsService:
        rules = ResultRules(result_key=self.result_key, accept_unsigned=self.settings.accept_unsigned_results,
                            accept_v1_tokens=self.settings.accept_v1_result_tokens)
        return ResultsService(self.store, self.outcomes, rules)

    @functools.cached_property
    def delivery(self) -> DeliveryService:
        """The delivery function's service: calls each execution's target (through the deliverer given, or
        ``build_deliverer``'s) and reports to the results topic; signs with the webhook secrets given, or
        ``build_webhook_secrets``' (``delivery_adapters``, which the API's routes of the secrets share)."""
        settings = self.settings
        rules = DeliveryRules(results_topic=settings.results_topic, concurrency=settings.delivery_concurrency,
                              tenant_concurrency=settings.delivery_tenant_concurrency, rates=settings.delivery_rates)
        adapters = self.delivery_adapters
        return DeliveryService(adapters.deliverer, adapters.webhook_secrets, self.publisher, self.clock, rules)

    @functools.cached_property
    def retirer(self) -> Retirer:
        return Retirer(self.store, self.clock, changes=self.change_book, quotas=self.quota_book,
                       limits=self.settings.tenant_limits)

    @functools.cached_property
    def scans(self) -> ScanService:
        rules = ScanRules(segment_count=self.start_segments(), topics=self.settings.topic_grants,
                          delivery_topic=self.settings.delivery_topic, targets=self.settings.target_grants,
                          dead_letter_topic=self.settings.dead_letter_topic, result_key=self.result_key,
                          idle_end=IDLE_END if self.waker.wakes else None)
        if self._scan_rules is not None:
            rules = self._scan_rules(rules)
        return ScanService(self.store, self.publisher, self.leases, self.clock, rules,
                           outcomes=self.outcomes, waker=self.waker, calendars=self.calendars, retirer=self.retirer)

    @functools.cached_property
    def reconciler(self) -> ReconcileService:
        """The safety net (``services.reconcile``): its progress is kept in the heartbeat table."""
        settings = self.settings
        if not isinstance(self.leases, ReconcilerStateStore):
            raise TypeError(f"{type(self.leases).__name__} keeps no reconciler state")
        interval = timedelta(seconds=settings.reconcile_interval_s)
        rules = ReconcileRules(
            segment_count=self.start_segments(), interval=interval, grace=timedelta(seconds=settings.reconcile_grace_s),
            page_size=settings.reconcile_page_size, rate=float(settings.reconcile_rate),
            budget=max(timedelta(seconds=5), interval * 0.8),
        )
        return ReconcileService(self.store, self.leases, self.leases, self.clock, rules,
                                changes=self.change_book, waker=self.waker)

    @functools.cached_property
    def segments(self) -> SegmentService:
        return SegmentService(self.leases, self.clock, self.settings.segments)


_container: Container | None = None


def container() -> Container:
    """The process-wide container (Lambda: built on the first invocation, reused after)."""
    global _container
    if _container is None:
        _container = Container(Settings.from_env())
    return _container


def install(custom: Container | None) -> Container | None:
    """Make ``custom`` the process-wide container (the local stack and tests); returns the one it replaces.

    ``None`` clears it (the next ``container()`` builds one from the environment)."""
    global _container
    previous, _container = _container, custom
    return previous
