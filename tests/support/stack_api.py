"""Talking to the local stack over HTTP in end-to-end tests."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import requests

if TYPE_CHECKING:
    from collections.abc import Callable

    from devstack.stack import LocalStack


def api(stack: LocalStack, method: str, path: str, body: Any = None, raw: str | None = None,
        token: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token or stack.token}", "content-type": "application/json"}
    return requests.request(method, stack.url + path, json=body if raw is None else None,
                            data=raw, headers=headers, timeout=10)


def eventually(read: Callable[[], Any], expected: Callable[[Any], bool] | Any, timeout_s: float = 20) -> Any:
    """Poll ``read()`` until it equals ``expected`` (or satisfies it, when callable); returns the last value."""
    done = expected if callable(expected) else (lambda value: value == expected)
    deadline = time.monotonic() + timeout_s
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.2)
        value = read()
    return value
