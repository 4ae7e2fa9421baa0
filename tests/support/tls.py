"""TLS without a network: a test root written as a CA bundle, server certificates it signs
(``devstack.certificates``, shared with the benchmark), handshakes in memory (``ssl.MemoryBIO``), and the name the
driver's own ``Connection`` checks when it opens a connection."""

from __future__ import annotations

import socket
import ssl
from typing import TYPE_CHECKING

from cassandra.connection import Connection, DefaultEndPoint

from devstack.certificates import Certificates

__all__ = ["Certificates", "handshake", "server_name_checked"]

if TYPE_CHECKING:
    from cassandra.cluster import Cluster


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, server_hostname: str | None) -> None:
    """A TLS handshake between ``client`` (checking ``server_hostname``) and ``server``, in memory; raises what the
    client's side raises."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_end = client.wrap_bio(to_client, to_server, server_hostname=server_hostname)
    back, forth = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_end = server.wrap_bio(back, forth, server_side=True)
    client_done = server_done = False
    for _ in range(10):
        if not client_done:
            try:
                client_end.do_handshake()
                client_done = True
            except ssl.SSLWantReadError:
                pass
        back.write(to_server.read())
        if not server_done:
            try:
                server_end.do_handshake()
                server_done = True
            except (ssl.SSLWantReadError, ssl.SSLError):
                pass  # a client that refused the certificate sends an alert; its own error is the one that counts
        to_client.write(forth.read())
        if client_done and server_done:
            return
    raise AssertionError("the handshake did not finish")


def server_name_checked(cluster: Cluster, address: str, port: int) -> str | None:
    """The name the driver's ``Connection`` checks when ``cluster`` opens a TLS connection to ``address``."""
    connection = Connection(DefaultEndPoint(address, port), ssl_context=cluster.ssl_context,
                            ssl_options=cluster.ssl_options)
    connection._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # never connected
    wrapped = connection._wrap_socket_from_context()
    try:
        name: str | None = wrapped.server_hostname
        return name
    finally:
        wrapped.close()
