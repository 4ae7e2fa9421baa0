"""The local API Gateway stand-in, on a real socket (no other server needed)."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

from devstack.gateway import serve


def _echo(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    body = json.dumps({"path": event["path"], "body": event["body"]})
    return {"statusCode": 201, "headers": {"Content-Type": "application/json"}, "body": body}


def test_a_keep_alive_client_gets_every_answer_whole() -> None:
    server = serve(_echo, lambda: {}, "127.0.0.1", 0)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        for n in range(5):  # one connection, one request after the other (each answer must be flushed)
            conn.request("POST", f"/jobs/{n}", body=json.dumps({"n": n}), headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 201
            assert json.loads(response.read()) == {"path": f"/jobs/{n}", "body": json.dumps({"n": n})}
        conn.close()
    finally:
        server.shutdown()


def test_an_answer_goes_out_in_one_write_without_waiting_for_acknowledgements() -> None:
    # Headers and body in two small writes made Nagle's algorithm hold the body until the client's delayed
    # acknowledgement (about 40 ms a request on a keep-alive connection: 178 submits/s from 8 clients).
    server = serve(_echo, lambda: {}, "127.0.0.1", 0)
    try:
        adapter = server.RequestHandlerClass
        assert adapter.wbufsize != 0  # type: ignore[attr-defined]  # buffered: flushed once per request
        assert adapter.disable_nagle_algorithm is True  # type: ignore[attr-defined]  # TCP_NODELAY
        with socket.create_connection(server.server_address, timeout=5) as client:
            client.sendall(b"GET /x HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
            first = client.recv(65536)
        assert first.startswith(b"HTTP/1.1 201") and first.endswith(b'"body": null}')  # all of it in one segment
    finally:
        server.shutdown()
