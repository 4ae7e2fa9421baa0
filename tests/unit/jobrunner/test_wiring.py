"""The container: which adapters it builds, and how tracing changes them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from jobrunner.adapters.clocks.manual import ManualClock
from jobrunner.adapters.invokers.memory import RecordingInvoker
from jobrunner.adapters.leases.memory import MemoryLeaseStore
from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.publishers.tracing import TracingPublisher
from jobrunner.adapters.quotas.memory import MemoryTenantQuotas
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.config import Settings
from jobrunner.delivery_wiring import build_deliverer, build_webhook_secrets
from jobrunner.domain.receipts import result_token, v1_result_token
from jobrunner.domain.schedules import At
from jobrunner.domain.segments import segment_of
from jobrunner.domain.spec import JobSpec, RetryPolicy
from jobrunner.ports import ScanRequest
from jobrunner.services.jobs import CountedQuotas, KeptChangeLog, NoChangeLog, NoQuotas
from jobrunner.services.results import WorkerReport
from jobrunner.services.scan import ScanRules
from jobrunner.services.tick import TickRules
from jobrunner.wiring import IDLE_END, Container

if TYPE_CHECKING:
    from pathlib import Path

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)


def test_without_tracing_the_publisher_is_the_one_given() -> None:
    publisher = MemoryPublisher()
    assert Container(Settings.from_env({}), publisher=publisher).publisher is publisher


def test_with_tracing_the_publisher_is_wrapped_in_spans(spans: InMemorySpanExporter) -> None:
    publisher = MemoryPublisher()
    traced = Container(Settings.from_env({}), publisher=publisher).publisher
    assert isinstance(traced, TracingPublisher) and traced.inner is publisher



def test_a_segment_count_raised_then_lowered_before_any_tick_still_gets_its_rows_scanned() -> None:
    # Given the API at 8 segments takes a job due in two minutes, before any tick ran with 8
    store, leases, clock = MemoryJobStore(), MemoryLeaseStore(), ManualClock(NOW)
    at_eight = Container(Settings.from_env({"JOBRUNNER_SEGMENTS": "8"}), store=store, leases=leases,
                         clock=clock)
    job = next(job for job in (at_eight.jobs.submit("alice", JobSpec(At(NOW + 2 * MINUTE), {}))[0]
                               for _ in range(50)) if segment_of(job.job_id, 8) >= 2)
    # When the count is lowered to 2 and the tick of the job's minute runs
    invoker = RecordingInvoker()
    at_two = Container(Settings.from_env({"JOBRUNNER_SEGMENTS": "2"}), store=store, leases=leases,
                       invoker=invoker, clock=clock)
    at_two.ticks.tick(NOW + 2 * MINUTE, NOW + 2 * MINUTE)
    # Then the job's segment, one only the raised count has, is scanned for its minute
    assert segment_of(job.job_id, 8) in {request.segment for request in invoker.requests}


def test_a_segment_first_used_long_before_the_next_tick_is_scanned_from_that_minute() -> None:
    # Given a count raised to 2 and a job due at once placed in the new segment, with no tick for 12 minutes
    store, leases, clock = MemoryJobStore(), MemoryLeaseStore(), ManualClock(NOW)
    leases.record_segment_count(1)
    leases.advance_watermark(0, NOW - MINUTE)
    at_two = Container(Settings.from_env({"JOBRUNNER_SEGMENTS": "2"}), store=store, leases=leases,
                       clock=clock)
    job = next(job for job in (at_two.jobs.submit("alice", JobSpec(At(NOW + 20 * SECOND), {}))[0]
                               for _ in range(50)) if segment_of(job.job_id, 2) == 1)
    (row,) = [row for row in store.rows.values() if row.job_id == job.job_id]
    # When the ticks come back, past the tick's initial lookback
    invoker = RecordingInvoker()
    later = Container(Settings.from_env({"JOBRUNNER_SEGMENTS": "2"}), store=store, leases=leases,
                      invoker=invoker, clock=clock)
    later.ticks.tick(NOW + 12 * MINUTE, NOW + 12 * MINUTE)
    # Then the new segment is scanned from the minute the job was written into it
    assert (row.bucket, row.segment) == (NOW, 1)
    assert ScanRequest(1, NOW) in invoker.requests


def test_the_scans_sign_and_the_results_check_with_the_configured_key() -> None:
    # Given a container configured with a result key
    settings = Settings.from_env({"JOBRUNNER_SEGMENTS": "1", "JOBRUNNER_RESULT_KEY": "the-configured-key"})
    services = Container(settings, store=MemoryJobStore(), publisher=MemoryPublisher(),
                         leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=ManualClock(NOW))
    job = services.jobs.submit("alice", JobSpec(At(NOW + MINUTE + 5 * SECOND), {"n": 1}))[0]
    # When its minute is scanned
    services.scans.scan(ScanRequest(segment=segment_of(job.job_id, 1), bucket=NOW + MINUTE))
    publisher = services.publisher
    assert isinstance(publisher, MemoryPublisher)
    [message] = publisher.sent
    # Then the message's token is the configured key's, and the results function takes a result with it only
    execution_id = message.value["execution_id"]
    assert message.value["result_token"] == result_token(b"the-configured-key", tenant="alice",
                                                         execution_id=execution_id, attempt=1)
    report = WorkerReport(execution_id, job.job_id, True)
    default_keys = result_token(b"", tenant="alice", execution_id=execution_id, attempt=1)
    assert services.results.apply(replace(report, result_token=default_keys)) == "refused_token"
    assert services.results.apply(replace(report, result_token=message.value["result_token"])) == "succeeded"


@pytest.mark.parametrize(("variable", "accepted"), [(None, True), ("false", False)], ids=["default", "turned-off"])
def test_first_scheme_tokens_are_accepted_during_an_upgrade_unless_the_settings_turn_them_off(
    variable: str | None, accepted: bool,
) -> None:
    # Given a container, and an execution whose message an older scan signed with the first scheme (its id alone)
    environment = {"JOBRUNNER_SEGMENTS": "1", "JOBRUNNER_RESULT_KEY": "the-configured-key"}
    if variable is not None:
        environment["JOBRUNNER_ACCEPT_V1_RESULT_TOKENS"] = variable
    services = Container(Settings.from_env(environment), store=MemoryJobStore(), publisher=MemoryPublisher(),
                         leases=MemoryLeaseStore(), invoker=RecordingInvoker(), clock=ManualClock(NOW))
    job = services.jobs.submit("alice", JobSpec(At(NOW + MINUTE + 5 * SECOND), {"n": 1}))[0]
    services.scans.scan(ScanRequest(segment=segment_of(job.job_id, 1), bucket=NOW + MINUTE))
    assert isinstance(services.publisher, MemoryPublisher)
    [message] = services.publisher.sent
    execution_id = message.value["execution_id"]
    first_scheme = v1_result_token(b"the-configured-key", execution_id)
    old = WorkerReport(execution_id, job.job_id, True, result_token=first_scheme)
    # Then its result is applied, unless the settings no longer accept the first scheme
    assert services.results.apply(old) == ("succeeded" if accepted else "refused_token")


def test_the_change_log_is_kept_unless_the_settings_turn_it_off() -> None:
    store = MemoryJobStore()
    assert Container(Settings.from_env({}), store=store).changes is not None
    assert Container(Settings.from_env({"JOBRUNNER_CHANGE_LOG": "off"}), store=store).changes is None


def test_the_services_keep_the_change_log_and_count_quotas_only_where_the_deployment_has_them() -> None:
    store = MemoryJobStore()
    bare = Container(Settings.from_env({"JOBRUNNER_CHANGE_LOG": "off"}), store=store)
    assert (type(bare.change_book), type(bare.quota_book)) == (NoChangeLog, NoQuotas)
    kept = Container(Settings.from_env({}), store=store, quotas=MemoryTenantQuotas())
    assert (type(kept.change_book), type(kept.quota_book)) == (KeptChangeLog, CountedQuotas)


@pytest.mark.parametrize("wakes", [False, True])
def test_a_scan_ends_idle_only_where_writers_wake_scans(wakes: bool) -> None:
    # Given a deployment whose writers wake scans (an invoker) or do not
    clock = ManualClock(datetime(2026, 11, 22, 10, 0, tzinfo=UTC))
    services = Container(Settings.from_env({}), store=MemoryJobStore(), publisher=MemoryPublisher(),
                         leases=MemoryLeaseStore(), invoker=RecordingInvoker() if wakes else None, clock=clock)
    # Then its waker says so, and a scan with nothing to do ends early only where it wakes
    assert services.waker.wakes is wakes
    assert services.scans._rules.idle_end == (IDLE_END if wakes else None)


def test_without_overrides_the_scan_and_the_tick_follow_the_settings_alone() -> None:
    # Given a deployment's container: rules from its settings only
    settings = Settings.from_env({"JOBRUNNER_SEGMENTS": "3", "JOBRUNNER_ALLOWED_TOPICS": "jobs,payroll",
                                  "JOBRUNNER_DLQ_TOPIC": "dead", "JOBRUNNER_RESULT_KEY": "k",
                                  "JOBRUNNER_INITIAL_LOOKBACK_MINUTES": "4"})
    services = Container(settings, store=MemoryJobStore(), publisher=MemoryPublisher(), leases=MemoryLeaseStore(),
                         invoker=RecordingInvoker(), clock=ManualClock(NOW))
    # Then what the settings name is theirs, and every other rule is the rules' own default
    assert services.scans._rules == ScanRules(segment_count=3, topics=settings.topic_grants, dead_letter_topic="dead",
                                              targets=settings.target_grants,
                                              result_key=b"k", idle_end=IDLE_END)
    assert services.ticks._rules == TickRules(segment_count=3, initial_lookback=4 * MINUTE)


def test_the_rules_no_setting_names_reach_the_scan_and_the_tick_through_their_overrides() -> None:
    # Given a container whose scan holds a window of 5 rows and whose tick catches up 3 minutes at a time
    settings = Settings.from_env({"JOBRUNNER_SEGMENTS": "2", "JOBRUNNER_RESULT_KEY": "k"})
    services = Container(settings, store=MemoryJobStore(), publisher=MemoryPublisher(), leases=MemoryLeaseStore(),
                         invoker=RecordingInvoker(), clock=ManualClock(NOW),
                         scan_rules=lambda rules: replace(rules, fair_window=5),
                         tick_rules=lambda rules: replace(rules, max_catch_up=3))
    # Then the services built have those rules, on top of the settings' ones
    assert services.scans._rules == ScanRules(segment_count=2, topics=settings.topic_grants, result_key=b"k",
                                              targets=settings.target_grants,
                                              idle_end=IDLE_END, fair_window=5)
    assert services.ticks._rules == TickRules(segment_count=2, max_catch_up=3)


@pytest.mark.parametrize("jitter", [0.0, 0.5])
def test_the_outcomes_place_a_retry_with_the_jitter_given(jitter: float) -> None:
    # Given a container whose outcomes draw a fixed jitter, and a job retried after 10 s (5 s to 10 s jittered)
    clock = ManualClock(NOW)
    services = Container(Settings.from_env({"JOBRUNNER_SEGMENTS": "1", "JOBRUNNER_CHANGE_LOG": "off"}),
                         store=MemoryJobStore(), publisher=MemoryPublisher(), leases=MemoryLeaseStore(), clock=clock,
                         jitter=lambda: jitter)
    job = services.jobs.submit("alice", JobSpec(At(NOW + MINUTE + 5 * SECOND), {}, retry=RetryPolicy(
        max_retries=1, initial_delay_s=10)))[0]
    services.scans.scan(ScanRequest(segment=0, bucket=NOW + MINUTE))
    assert isinstance(services.publisher, MemoryPublisher)
    [message] = services.publisher.sent
    # When its execution fails
    failed_at = clock.now()
    assert services.results.apply(WorkerReport(message.value["execution_id"], job.job_id, False,
                                               result_token=message.value["result_token"])) == "retrying"
    # Then its retry is due after the backoff that jitter draws
    [retry] = [row for row in services.store.rows.values() if row.attempt == 2]
    assert retry.due_at == failed_at + timedelta(seconds=5 + 5 * jitter)


@pytest.mark.parametrize(("function", "drivers"), [
    ("api", {"cassandra.cluster"}), ("scan", {"cassandra.cluster", "kafka"}),
    ("results", {"cassandra.cluster", "kafka"}), ("tick", set()), ("reconcile", {"cassandra.cluster"}),
    ("delivery", {"kafka"}),
])
def test_a_function_loads_the_drivers_it_uses_at_init_and_no_other(function: str, drivers: set[str]) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    # At init (Lambda's, with the most CPU), not on the first call, which a scan would pay in lateness;
    # the tick, which talks to DynamoDB and Lambda only, pays for neither driver.
    root = Path(__file__).resolve().parents[3]
    probe = "import sys, handler; print(sorted({'cassandra.cluster', 'kafka'} & set(sys.modules)))"
    path = os.pathsep.join(str(root / p) for p in (f"functions/{function}", "layers", "client"))
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": path}, cwd=root / "functions" / function)
    assert answer.stdout.strip() == str(sorted(drivers)), answer.stderr


def test_the_segments_are_started_once_by_the_first_writer_built_and_never_by_a_reader() -> None:
    # Given a container at 4 segments over a heartbeat table that has seen none
    leases = MemoryLeaseStore()
    services = Container(Settings.from_env({"JOBRUNNER_SEGMENTS": "4"}), store=MemoryJobStore(), leases=leases,
                         publisher=MemoryPublisher(), invoker=RecordingInvoker(), clock=ManualClock(NOW))
    # When only what reads is built (the tick, the segments' health), nothing is recorded
    _ = services.ticks, services.segments
    assert leases.segments(range(4)) == []
    # When a writer is built, the count is recorded and each segment started, once for all the writers
    _ = services.jobs
    assert [state.segment for state in leases.segments(range(4))] == [0, 1, 2, 3]
    assert leases.record_segment_count(1) == 4
    assert services.start_segments() == 4


def test_the_change_log_and_the_calendars_go_on_the_session_given_with_a_store_and_in_memory_without_one() -> None:
    from jobrunner.adapters.stores.calendars import CassandraCalendarStore, MemoryCalendarStore
    from jobrunner.adapters.stores.changes import CassandraChangeLog, MemoryChangeLog

    settings = Settings.from_env({})
    alone = Container(settings, store=MemoryJobStore())
    assert isinstance(alone.changes, MemoryChangeLog) and isinstance(alone.calendars, MemoryCalendarStore)
    with pytest.raises(LookupError):
        _ = alone.session  # it connects to no database of its own
    session = object()
    beside = Container(settings, store=MemoryJobStore(), session=session)  # type: ignore[arg-type]
    assert isinstance(beside.changes, CassandraChangeLog) and isinstance(beside.calendars, CassandraCalendarStore)
    assert beside.session is session


def test_the_delivery_calls_each_kind_of_target_with_its_adapter_and_checks_addresses_against_the_allow_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobrunner.adapters.deliverers.https import HttpsDeliverer
    from jobrunner.adapters.deliverers.routing import RoutingDeliverer
    from jobrunner.adapters.webhook_secrets.memory import MemoryWebhookSecrets
    from jobrunner.domain.targets import HttpsTarget
    from jobrunner.ports import AddressRefused, DeliveryCall

    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    settings = {"JOBRUNNER_TARGET_ADDRESS_ALLOW": "10.0.0.0/8", "JOBRUNNER_DELIVERY_TENANT_CONCURRENCY": "3",
                "JOBRUNNER_DELIVERY_TENANT_RATE": "7",
                "JOBRUNNER_TENANT_LIMITS": '{"payments": {"deliveries_per_second": 50}}'}
    services = Container(Settings.from_env(settings), store=MemoryJobStore(), publisher=MemoryPublisher(),
                         leases=MemoryLeaseStore(), clock=ManualClock(datetime(2026, 11, 22, tzinfo=UTC)))
    deliverer = build_deliverer(services)
    assert isinstance(deliverer, RoutingDeliverer)
    https = deliverer._of(HttpsTarget)
    assert isinstance(https, HttpsDeliverer) and deliverer._of(HttpsTarget) is https
    # loopback is not in this stage's allow-list: refused before any connection
    refused = deliverer.deliver(DeliveryCall(HttpsTarget("https://127.0.0.1:9/").checked(), b""))
    assert isinstance(refused, AddressRefused) and refused.reason == "a loopback address"
    assert isinstance(build_webhook_secrets(services), MemoryWebhookSecrets)  # off Lambda: in memory
    assert services.delivery._rules.tenant_concurrency == 3
    rates = services.delivery._rules.rates
    assert (rates.of("payments"), rates.of("anyone")) == (50, 7)


@pytest.mark.parametrize(("variables", "endpoint"), [
    ({"JOBRUNNER_TARGET_AWS_ENDPOINT": "http://127.0.0.1:5001"}, "http://127.0.0.1:5001"),  # the local stack's moto
    ({}, "https://{service}.eu-west-1.amazonaws.com"),  # AWS's own
])
def test_the_lambda_and_sqs_targets_are_called_at_the_target_endpoint_the_settings_name(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], endpoint: str,
) -> None:
    from jobrunner.domain.targets import LambdaTarget, SqsTarget

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    # DynamoDB's endpoint is another setting: the targets never follow it
    settings = Settings.from_env({**variables, "AWS_REGION": "eu-west-1", "DYNAMODB_ENDPOINT": "http://127.0.0.1:9"})
    services = Container(settings, store=MemoryJobStore(), publisher=MemoryPublisher(), leases=MemoryLeaseStore())
    deliverer = build_deliverer(services)
    for kind, service in ((LambdaTarget, "lambda"), (SqsTarget, "sqs")):
        client = deliverer._of(kind)._client  # type: ignore[attr-defined]
        assert client.meta.endpoint_url == endpoint.format(service=service)


def test_https_targets_are_also_trusted_by_the_ca_bundle_the_settings_name(tmp_path: Path) -> None:
    import ssl

    from cryptography import x509

    from jobrunner.adapters.deliverers.https import HttpsDeliverer
    from jobrunner.domain.targets import HttpsTarget
    from tests.support.tls import Certificates, handshake

    certificates = Certificates(tmp_path)
    receiver = certificates.server(x509.DNSName("hooks.test"))

    def trust(variables: dict[str, str]) -> ssl.SSLContext:
        services = Container(Settings.from_env(variables), store=MemoryJobStore(), publisher=MemoryPublisher(),
                             leases=MemoryLeaseStore())
        https = build_deliverer(services)._of(HttpsTarget)  # type: ignore[attr-defined]
        assert isinstance(https, HttpsDeliverer)
        return https._context

    trusting = trust({"JOBRUNNER_TARGET_CA_BUNDLE": str(certificates.bundle)})
    handshake(trusting, receiver, "hooks.test")
    with pytest.raises(ssl.SSLCertVerificationError):  # the name is still checked
        handshake(trusting, receiver, "other.test")
    with pytest.raises(ssl.SSLCertVerificationError):  # without the bundle: the system's CAs only
        handshake(trust({}), receiver, "hooks.test")


def test_in_lambda_the_webhook_secrets_are_in_secrets_manager_under_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobrunner.adapters.webhook_secrets.secretsmanager import SecretsManagerWebhookSecrets

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "jobrunner-delivery")
    services = Container(Settings.from_env({"JOBRUNNER_WEBHOOK_SECRET_PREFIX": "prod/hooks/"}),
                         store=MemoryJobStore(), publisher=MemoryPublisher(), leases=MemoryLeaseStore())
    secrets = build_webhook_secrets(services)
    assert isinstance(secrets, SecretsManagerWebhookSecrets) and secrets.secret_name("alice") == "prod/hooks/alice"


def test_a_target_address_allow_list_that_is_no_cidr_is_refused() -> None:
    from jobrunner.config import SettingsError

    with pytest.raises(SettingsError, match="JOBRUNNER_TARGET_ADDRESS_ALLOW"):
        Settings.from_env({"JOBRUNNER_TARGET_ADDRESS_ALLOW": "10.0.0.1/8"})


def test_where_secrets_manager_has_an_endpoint_the_webhook_secrets_are_kept_there_for_the_api_and_the_delivery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobrunner.adapters.webhook_secrets.secretsmanager import SecretsManagerWebhookSecrets

    # Given a local stack off Lambda that names moto's endpoint, a short cache and a tenant's fixed secret
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    fixed = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    settings = Settings.from_env({"SECRETSMANAGER_ENDPOINT": "http://127.0.0.1:5001", "AWS_REGION": "eu-west-1",
                                  "JOBRUNNER_WEBHOOK_SECRET_CACHE_S": "1",
                                  "JOBRUNNER_WEBHOOK_SECRETS": f'{{"alice": ["{fixed}"]}}'})
    services = Container(settings, store=MemoryJobStore(), publisher=MemoryPublisher(), leases=MemoryLeaseStore())
    secrets = services.delivery_adapters.webhook_secrets
    # Then they are Secrets Manager's, at that endpoint, and the delivery signs with the same store
    assert isinstance(secrets, SecretsManagerWebhookSecrets)
    assert secrets._client.meta.endpoint_url == "http://127.0.0.1:5001"
    assert secrets._cache_for == timedelta(seconds=1) and secrets._seeds == {"alice": [fixed]}
    assert services.delivery._secrets is secrets
