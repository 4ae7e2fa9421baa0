"""Targets end to end on the local stack: the delivery consumer calls an HTTPS receiver, moto's Lambda and moto's
SQS, and the results come back through the results function as a worker's would.

The HTTPS receiver is started here (``http.server`` over TLS on 127.0.0.1, an ephemeral port) with a certificate
of the session's test root, which the stack trusts besides the system's CAs (``JOBRUNNER_TARGET_CA_BUNDLE``);
loopback is allow-listed for the session (``JOBRUNNER_TARGET_ADDRESS_ALLOW``), and the tenant of these jobs has
a webhook secret in the settings, with which the receiver verifies every delivery using the Standard Webhooks
library (one the project does not write). A delivery that does not verify is answered 401 and recorded.

Lambda and SQS are moto's (``JOBRUNNER_TARGET_AWS_ENDPOINT``). The SQS delivery is read back from the queue.
moto runs a Lambda function only in Docker, which these machines lack: an invoke of a function that exists
reaches moto's Lambda and comes back as a function error (``Handled``, moto's "error running docker"), so what
is exercised is the call reaching the function on moto and that error being judged by the outcome rules
(retried, then dead-lettered); a function that runs and returns is not. A function that does not exist is
refused by moto's Lambda and dead-lettered at once.

Every job is submitted once, by one module fixture, so the scenarios run side by side and the file takes about
as long as its slowest one; each test then reads what became of its own job.
"""

from __future__ import annotations

import io
import ipaddress
import json
import threading
import time
import uuid
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from cryptography import x509
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from devstack import tokens
from jobrunner.domain.schedules import parse_instant
from tests.conftest import MOTO_ACCOUNT, team
from tests.support.kafka_watch import TopicWatch
from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack.stack import LocalStack
    from tests.support.tls import Certificates

pytestmark = pytest.mark.e2e

#: What the receiver answers each path, attempt by attempt (the last answer repeats): a status, headers, a body.
#: ``HANG`` holds the request past the target's timeout and answers nothing.
HANG = 0
ANSWERS: dict[str, list[tuple[int, dict[str, str], bytes]]] = {
    "/ok": [(200, {}, b"thanks")],
    "/flaky": [(500, {}, b"database is down"), (200, {}, b"thanks")],
    "/busy": [(429, {"Retry-After": "2"}, b"slow down"), (200, {}, b"thanks")],
    "/gone": [(404, {}, b"no such hook")],
    "/hang": [(HANG, {}, b"")],
}
#: How long a hanging answer holds its request, well past the target's timeout.
HANG_S = 8
TIMEOUT_S = 2
#: Short retries, so each scenario ends in seconds.
RETRY = {"max_retries": 1, "backoff": {"initial_delay_s": 1, "multiplier": 1, "max_delay_s": 5}}
#: Long enough for the slowest scenario (the hang: two timeouts and a backoff) and a slow scan.
WAIT_S = 45


@dataclass(frozen=True)
class Delivery:
    """One request the receiver got: verified or not, and when."""

    path: str
    headers: dict[str, str]
    body: Any
    verified: bool
    at: float


@dataclass
class Receiver:
    secret: str
    port: int = 0
    deliveries: dict[str, list[Delivery]] = field(default_factory=lambda: defaultdict(list))
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def received(self, path: str) -> list[Delivery]:
        with self.lock:
            return list(self.deliveries[path])


def handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                body, verified = Webhook(receiver.secret).verify(raw, headers), True
            except WebhookVerificationError:
                body, verified = raw, False
            with receiver.lock:
                seen = receiver.deliveries[self.path]
                seen.append(Delivery(self.path, headers, body, verified, time.monotonic()))
                answers = ANSWERS[self.path]
                status, extra, out = answers[min(len(seen), len(answers)) - 1]
            if not verified:
                status, extra, out = 401, {}, b"bad signature"
            if status == HANG:
                receiver.released.wait(HANG_S)
                return
            self.send_response(status)
            for name, value in {**extra, "Content-Length": str(len(out))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(out)

    return Handler


@pytest.fixture(scope="module")
def hooks_tenant(local_stack: LocalStack, run_id: str) -> tuple[str, str, str]:
    """The tenant with a webhook secret in the session's settings: its name, a token of it, its secret."""
    tenant = team("hooks", run_id)
    [secret] = local_stack.settings.webhook_secrets[tenant]
    return tenant, tokens.add(tenant), secret


@pytest.fixture(scope="module")
def receiver(hooks_tenant: tuple[str, str, str], target_certificates: Certificates) -> Iterator[Receiver]:
    receiver = Receiver(secret=hooks_tenant[2])
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(receiver))
    server.daemon_threads = True
    tls = target_certificates.server(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="receiver", daemon=True)
    thread.start()
    yield receiver
    receiver.released.set()
    server.shutdown()
    server.server_close()


@dataclass(frozen=True)
class Moto:
    queue_url: str  # as the target names it (AWS's form; moto finds the queue by account and name)
    read_queue_url: str  # as moto gives it
    function_arn: str
    sqs: Any


@pytest.fixture(scope="module")
def moto(local_stack: LocalStack) -> Moto:
    """A queue and a function on the stack's moto."""
    settings = local_stack.settings
    endpoint, region, name = settings.target_aws_endpoint, settings.region, f"targets-{uuid.uuid4().hex[:8]}"
    sqs = boto3.client("sqs", region_name=region, endpoint_url=endpoint)
    read_queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    iam = boto3.client("iam", region_name=region, endpoint_url=endpoint)
    role = iam.create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": []}))["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    function_arn = boto3.client("lambda", region_name=region, endpoint_url=endpoint).create_function(
        FunctionName=name, Runtime="python3.12", Role=role, Handler="handler.handler",
        Code={"ZipFile": code.getvalue()})["FunctionArn"]
    return Moto(f"https://sqs.{region}.amazonaws.com/{MOTO_ACCOUNT}/{name}", read_queue_url, function_arn, sqs)


@pytest.fixture(scope="module")
def dead_letters(local_stack: LocalStack) -> Iterator[TopicWatch]:
    watch = TopicWatch(local_stack.settings.kafka.bootstrap, local_stack.settings.dead_letter_topic)
    yield watch
    watch.close()


@dataclass(frozen=True)
class Run:
    stack: LocalStack
    token: str
    jobs: dict[str, str]  # scenario -> job id

    def executions(self, scenario: str) -> list[dict[str, Any]]:
        items = api(self.stack, "GET", f"/jobs/{self.jobs[scenario]}/executions", token=self.token).json()["items"]
        return sorted(items, key=lambda e: e["attempt"])

    def settled(self, scenario: str, statuses: list[str]) -> list[dict[str, Any]]:
        """The job's history once its attempts ended as ``statuses`` (and the job itself ended)."""
        def read() -> tuple[list[dict[str, Any]], str]:
            job = api(self.stack, "GET", f"/jobs/{self.jobs[scenario]}", token=self.token).json()
            return self.executions(scenario), job["status"]

        def ended(seen: tuple[list[dict[str, Any]], str]) -> bool:
            return [e["status"] for e in seen[0]] == statuses and seen[1] in ("SUCCESS", "FAILED")

        last: tuple[list[dict[str, Any]], str] = eventually(read, ended, timeout_s=WAIT_S)
        history, status = last
        assert [e["status"] for e in history] == statuses, history
        assert status == statuses[-1], status
        assert [(e["attempt"], e["trigger"]) for e in history] == [
            (n, "SCHEDULE" if n == 1 else "RETRY") for n in range(1, len(statuses) + 1)], history
        return history

    def ledger(self, scenario: str) -> dict[str, Any]:
        fires: dict[str, Any] = api(self.stack, "GET", f"/jobs/{self.jobs[scenario]}/fires",
                                    token=self.token).json()
        return fires


@pytest.fixture(scope="module")
def run(local_stack: LocalStack, hooks_tenant: tuple[str, str, str], receiver: Receiver, moto: Moto,
        dead_letters: TopicWatch) -> Run:
    """Every scenario's job, submitted at once, due a few seconds from now."""
    _, token, _ = hooks_tenant
    at = (datetime.now(UTC) + timedelta(seconds=3)).isoformat()
    https = {path.strip("/"): {"https": {"url": receiver.url(path), "timeout_s": TIMEOUT_S}} for path in ANSWERS}
    targets = {**https, "sqs": {"sqs": {"queue_url": moto.queue_url}},
               "lambda": {"lambda": {"function_arn": moto.function_arn}},
               "lambda-missing": {"lambda": {"function_arn": moto.function_arn + "-missing"}}}
    jobs = {}
    for scenario, target in targets.items():
        # a permanent failure is not retried even where the policy would allow it
        retry = {**RETRY, "max_retries": 3} if scenario in ("gone", "lambda-missing") else RETRY
        body = {"schedule": {"at": at}, "target": target, "payload": {"scenario": scenario,
                                                                      "attempt": "<jobrunner.attempt>"}, **retry}
        response = api(local_stack, "POST", "/jobs", body, token=token)
        assert response.status_code == 201, response.text
        assert response.json()["topic"] is None
        jobs[scenario] = response.json()["job_id"]
    return Run(local_stack, token, jobs)


def dead_letter_of(dead_letters: TopicWatch, job_id: str) -> list[dict[str, Any]]:
    received = dead_letters.wait_for(lambda r: any(m.key == job_id for m in r), timeout_s=WAIT_S)
    return [m.value for m in received if m.key == job_id]


def published_once(ledger: dict[str, Any], attempts: int) -> None:
    """The ledger shows the one fire, published, with every attempt of it."""
    [fire] = ledger["items"]
    assert (fire["outcome"], ledger["unaccounted"]) == ("published", 0), ledger
    assert [e["attempt"] for e in sorted(fire["executions"], key=lambda e: e["attempt"])] == list(
        range(1, attempts + 1)), fire


# -- HTTPS ------------------------------------------------------------------------------------------------


def test_a_200_is_one_success_delivered_signed_with_the_context(run: Run, receiver: Receiver) -> None:
    [execution] = run.settled("ok", ["SUCCESS"])
    [delivery] = receiver.received("/ok")
    assert delivery.verified
    assert delivery.body == {"scenario": "ok", "attempt": 1}  # the context keyword substituted
    assert delivery.headers["webhook-id"] == execution["execution_id"]
    assert (delivery.headers["jobrunner-job-id"], delivery.headers["jobrunner-attempt"]) == (run.jobs["ok"], "1")
    published_once(run.ledger("ok"), 1)


def test_a_500_then_a_200_is_a_failure_then_a_retried_success(run: Run, receiver: Receiver) -> None:
    history = run.settled("flaky", ["FAILED", "SUCCESS"])
    assert history[0]["error"] == "HTTP 500: database is down"
    deliveries = receiver.received("/flaky")
    assert [d.verified for d in deliveries] == [True, True]
    assert [d.body["attempt"] for d in deliveries] == [1, 2]
    assert [d.headers["webhook-id"] for d in deliveries] == [e["execution_id"] for e in history]
    published_once(run.ledger("flaky"), 2)


def test_a_429_with_retry_after_is_retried_no_sooner_than_it_asks(run: Run, receiver: Receiver) -> None:
    history = run.settled("busy", ["FAILED", "SUCCESS"])
    assert history[0]["error"] == "HTTP 429: slow down"
    first, second = receiver.received("/busy")
    assert first.verified and second.verified
    # the job's own backoff is at most 1 s: the retry waited the 2 s the answer asked for
    assert second.at - first.at >= 2.0, second.at - first.at
    finished = parse_instant(history[0]["finished_at"], "finished_at")
    assert parse_instant(history[1]["due_at"], "due_at") - finished >= timedelta(seconds=2), history
    published_once(run.ledger("busy"), 2)


def test_a_404_is_dead_lettered_at_once_without_a_retry(run: Run, receiver: Receiver,
                                                         dead_letters: TopicWatch) -> None:
    [letter] = dead_letter_of(dead_letters, run.jobs["gone"])
    [execution] = run.settled("gone", ["FAILED"])  # though its policy allows 3 retries
    assert execution["error"] == "HTTP 404: no such hook"
    assert (letter["attempt"], letter["error"], letter["execution_id"]) == (1, "HTTP 404: no such hook",
                                                                            execution["execution_id"])
    assert [d.verified for d in receiver.received("/gone")] == [True]
    published_once(run.ledger("gone"), 1)


def test_a_hang_past_the_timeout_is_retried_per_the_policy_then_dead_lettered(
    run: Run, receiver: Receiver, dead_letters: TopicWatch,
) -> None:
    [letter] = dead_letter_of(dead_letters, run.jobs["hang"])
    history = run.settled("hang", ["FAILED", "FAILED"])  # max_retries 1
    assert [e["error"] for e in history] == [f"timed out after {TIMEOUT_S} s"] * 2
    assert (letter["attempt"], letter["execution_id"]) == (2, history[1]["execution_id"])
    assert [d.verified for d in receiver.received("/hang")] == [True, True]
    # each call ended at the target's timeout, not when the receiver gave up
    for execution in history:
        published = parse_instant(execution["published_at"], "published_at")
        took = parse_instant(execution["finished_at"], "finished_at") - published
        assert timedelta(seconds=TIMEOUT_S) <= took < timedelta(seconds=HANG_S), execution
    published_once(run.ledger("hang"), 2)


# -- SQS and Lambda, on moto -----------------------------------------------------------------------------


def test_an_sqs_target_gets_the_message_with_the_context_as_attributes(run: Run, moto: Moto) -> None:
    [execution] = run.settled("sqs", ["SUCCESS"])
    messages = eventually(lambda: moto.sqs.receive_message(
        QueueUrl=moto.read_queue_url, MessageAttributeNames=["All"], WaitTimeSeconds=1).get("Messages", []),
        lambda found: len(found) > 0)
    [message] = messages
    assert json.loads(message["Body"]) == {"scenario": "sqs", "attempt": 1}
    attributes = {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
    assert attributes["jobrunner-job-id"] == run.jobs["sqs"] and attributes["jobrunner-attempt"] == "1"
    assert execution["error"] is None
    published_once(run.ledger("sqs"), 1)


def test_a_lambda_target_is_invoked_on_moto_and_its_function_error_is_retried_then_dead_lettered(
    run: Run, dead_letters: TopicWatch,
) -> None:
    # moto runs no function without Docker: the invoke reaches the function, which answers a function error
    [letter] = dead_letter_of(dead_letters, run.jobs["lambda"])
    history = run.settled("lambda", ["FAILED", "FAILED"])  # retried, as a function error is (max_retries 1)
    for execution in history:
        assert execution["error"].startswith("Lambda function error (Handled): "), execution
        assert "docker" in execution["error"], execution
    assert letter["attempt"] == 2
    published_once(run.ledger("lambda"), 2)


def test_a_lambda_function_that_does_not_exist_is_dead_lettered_at_once(run: Run, dead_letters: TopicWatch) -> None:
    [letter] = dead_letter_of(dead_letters, run.jobs["lambda-missing"])
    [execution] = run.settled("lambda-missing", ["FAILED"])  # though its policy allows 3 retries
    assert execution["error"].startswith("Lambda ResourceNotFoundException: "), execution
    assert letter["attempt"] == 1
    published_once(run.ledger("lambda-missing"), 1)

