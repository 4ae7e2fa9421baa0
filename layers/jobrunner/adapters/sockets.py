"""TCP options that let a connection whose peer went away fail in seconds, for the driver and the producer.

In AWS a connection can die while the Lambda environment is frozen: the server closes it after its idle
timeout, or the NLB / NAT gateway / VPC endpoint on the path forgets the flow after 350 s idle. On thaw
the client still thinks it is open. Keepalive probes (sent by the kernel every ``KEEPALIVE_IDLE_S``,
well under 350 s) keep an idle flow known to the path when the kernel runs, and find a dead one; and
``TCP_USER_TIMEOUT`` fails a connection whose sent data stays unacknowledged for ``USER_TIMEOUT_MS``,
so a request written into a flow the path silently drops errors out instead of waiting for the whole
request timeout. Options the platform lacks (TCP_KEEPIDLE, TCP_USER_TIMEOUT: Linux) are left out.
"""

from __future__ import annotations

import socket

KEEPALIVE_IDLE_S = 60
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_PROBES = 3
#: Shorter than the driver's (10 s) and the producer's (about 6.5 s) request timeouts.
USER_TIMEOUT_MS = 5_000


def liveness_options() -> list[tuple[int, int, int]]:
    """``(level, option, value)`` triples for ``setsockopt``: keepalive on and tuned, and a user timeout."""
    wanted = [
        ("SO_KEEPALIVE", socket.SOL_SOCKET, 1),
        ("TCP_KEEPIDLE", socket.IPPROTO_TCP, KEEPALIVE_IDLE_S),
        ("TCP_KEEPINTVL", socket.IPPROTO_TCP, KEEPALIVE_INTERVAL_S),
        ("TCP_KEEPCNT", socket.IPPROTO_TCP, KEEPALIVE_PROBES),
        ("TCP_USER_TIMEOUT", socket.IPPROTO_TCP, USER_TIMEOUT_MS),
    ]
    return [(level, getattr(socket, name), value) for name, level, value in wanted if hasattr(socket, name)]
