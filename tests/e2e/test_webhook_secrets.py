"""A rotation of a tenant's webhook secret through the API while its deliveries go to an HTTPS receiver.

The secrets are on the stack's moto (Secrets Manager), read by the API and by the delivery alike; the delivery
reads them again each second on the local stack. The receiver (TLS on 127.0.0.1, as in ``test_targets.py``)
keeps each delivery as it came; each is then verified with the Standard Webhooks library (one the project does
not write) twice: as a receiver that knows only the old secret would, and as one that knows only the new one.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from cryptography import x509
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from devstack import tokens
from tests.support.stack_api import api, eventually

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack.stack import LocalStack
    from tests.support.tls import Certificates

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Delivery:
    body: bytes
    headers: dict[str, str]

    def verifies_with(self, secret: str) -> bool:
        try:
            Webhook(secret).verify(self.body, self.headers)
        except WebhookVerificationError:
            return False
        return True


@dataclass
class Receiver:
    port: int = 0
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def received(self) -> list[Delivery]:
        with self.lock:
            return list(self.deliveries)


@pytest.fixture(scope="module")
def receiver(target_certificates: Certificates) -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            with receiver.lock:
                receiver.deliveries.append(Delivery(raw, {k.lower(): v for k, v in self.headers.items()}))
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tls = target_certificates.server(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="rotation-receiver", daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()


def test_a_rotation_through_the_api_signs_under_both_secrets_for_its_grace_and_its_end_drops_the_old_one(
    local_stack: LocalStack, receiver: Receiver, run_id: str,
) -> None:
    began = time.monotonic()
    # Given a tenant of its own (no fixed secret) and a job delivering to the receiver, run on demand
    tenant = f"team-rotation-{run_id}-{uuid.uuid4().hex[:4]}"
    token = tokens.add(tenant)
    target = {"https": {"url": f"https://127.0.0.1:{receiver.port}/hook", "timeout_s": 5}}
    job = api(local_stack, "POST", "/jobs", {"schedule": {"every": "PT1H"}, "target": target, "payload": {"n": 1},
                                             "max_retries": 0}, token=token)
    assert job.status_code == 201, job.text
    job_id = job.json()["job_id"]

    def delivered() -> Delivery:
        """Run the job now; the delivery the receiver then gets."""
        seen = len(receiver.received())
        assert api(local_stack, "POST", f"/jobs/{job_id}/run", token=token).status_code == 202
        deliveries: list[Delivery] = eventually(receiver.received, lambda got: len(got) > seen, timeout_s=10)
        assert len(deliveries) == seen + 1, deliveries
        return deliveries[-1]

    def secrets(response: Any) -> list[dict[str, Any]]:
        assert response.status_code == 200, response.text
        assert response.headers["Cache-Control"] == "no-store"
        items: list[dict[str, Any]] = response.json()["items"]
        return items

    # The tenant reads its secret (created by this read) and the delivery signs with it
    [old] = secrets(api(local_stack, "GET", "/webhook-secrets", token=token))
    first = delivered()
    assert first.verifies_with(old["secret"])

    # When it rotates with a grace of ten minutes
    new, previous = secrets(api(local_stack, "POST", "/webhook-secrets/rotate", {"grace_s": 600}, token=token))
    assert (new["current"], previous["id"], previous["current"]) == (True, old["id"], False)
    # (kept in the stack's Secrets Manager, where every process of the stack, API or delivery, reads them)
    settings = local_stack.settings
    kept = boto3.client("secretsmanager", region_name=settings.region, endpoint_url=settings.secrets_endpoint
                        ).get_secret_value(SecretId=settings.webhook_secret_prefix + tenant)["SecretString"]
    assert [entry["id"] for entry in json.loads(kept)] == [new["id"], old["id"]]
    time.sleep(1.2)  # the delivery reads the tenant's secrets again each second on the local stack
    # Then during the grace a receiver that knows only the old secret verifies, and one that knows only the new
    during = delivered()
    assert during.verifies_with(old["secret"]) and during.verifies_with(new["secret"])
    assert len(during.headers["webhook-signature"].split()) == 2

    # When it ends the rotation
    [kept] = secrets(api(local_stack, "DELETE", "/webhook-secrets/previous", token=token))
    assert kept["id"] == new["id"]
    time.sleep(1.2)
    # Then only the new secret verifies
    after = delivered()
    assert after.verifies_with(new["secret"]) and not after.verifies_with(old["secret"])
    assert time.monotonic() - began < 30
