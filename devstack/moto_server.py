"""moto's AWS mock server, with each DynamoDB request applied atomically, as DynamoDB applies it.

moto serves requests on threads and keeps no lock around a request's work: two conditional writes of
one item can both read it before either writes, and a ``TransactWriteItems`` that fails restores a copy
of the table taken before it began, losing what other requests wrote meanwhile. DynamoDB itself applies
each request atomically (a condition and its write together, a transaction all or nothing), and the
quota counters rely on it (``jobrunner.adapters.quotas.dynamodb``). So this server runs moto's own
application behind one lock for the DynamoDB API's requests; every other service is served as moto
serves it. Run as ``python -m devstack.moto_server -H <host> -p <port>``.
"""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING, Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

#: The ``X-Amz-Target`` prefix of the DynamoDB API's requests (``DynamoDB_20120810.UpdateItem``, ...).
DYNAMODB_TARGET = "DynamoDB_"


class AtomicDynamoDB:
    """A WSGI application answering DynamoDB's requests one at a time, and the others as ``app`` does."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith(DYNAMODB_TARGET):
            return self._app(environ, start_response)
        with self._lock:
            return list(self._app(environ, start_response))  # the whole answer, before the next request


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5001)
    args = parser.parse_args(argv)
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, AtomicDynamoDB(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
