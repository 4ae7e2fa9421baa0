"""Fixtures of the edge tests: a tenant of their own on the session's local stack, cleaned up afterwards."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import requests

from devstack import tokens

if TYPE_CHECKING:
    from collections.abc import Iterator

    from devstack.stack import LocalStack

#: Every request of these tests gives up after this long: a request that takes longer is a hang.
REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Tenant:
    """A tenant of its own on the local stack, so that whatever the fuzzing writes stays out of other tests' way."""

    name: str
    token: str
    url: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def request(self, method: str, path: str, *, data: bytes | str | None = None, json: Any = None,
                headers: dict[str, str] | None = None, auth: bool = True) -> requests.Response:
        """One request over HTTP; ``data`` is sent as is, with only the headers given (and the token)."""
        sent = {**(self.auth if auth else {}), **(headers or {})}
        return requests.request(method, self.url + path, data=data, json=json, headers=sent,
                                timeout=REQUEST_TIMEOUT_S, allow_redirects=False)

    def submit(self, body: dict[str, Any]) -> str:
        response = self.request("POST", "/jobs", json=body)
        assert response.status_code == 201, response.text
        job_id: str = response.json()["job_id"]
        return job_id

    def cancel_everything(self) -> None:
        """Cancel every job of this tenant, so that none of them fires later in the session."""
        path = "/jobs?limit=500"
        while True:
            page = self.request("GET", path)
            assert page.status_code == 200, page.text
            for job in page.json()["items"]:
                if job["state"] != "CANCELLED":
                    self.request("DELETE", f"/jobs/{job['job_id']}")
            if page.json()["next_cursor"] is None:
                return
            path = f"/jobs?limit=500&cursor={page.json()['next_cursor']}"


@pytest.fixture(scope="module")
def tenant(local_stack: LocalStack) -> Iterator[Tenant]:
    name = f"fuzz-{uuid.uuid4().hex[:8]}"
    fuzzing = Tenant(name=name, token=tokens.add(name), url=local_stack.url)
    yield fuzzing
    fuzzing.cancel_everything()
