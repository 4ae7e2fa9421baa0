"""connect(): its connections fail fast when dead, and are replaced after a long idle (a Lambda freeze)."""

from __future__ import annotations

import socket
from concurrent.futures import Future
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from jobrunner.adapters import sockets
from jobrunner.adapters.stores import session as session_module
from jobrunner.adapters.stores.session import CassandraSettings, RenewAfterIdle, connect

if TYPE_CHECKING:
    import pytest


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class PoolRenewingSession:
    """The part of a driver Session that RenewAfterIdle uses; records the pools it renews."""

    def __init__(self, hosts: list[Any], *, fails: bool = False) -> None:
        self.renewed: list[str] = []
        self.fails = fails
        self.cluster = SimpleNamespace(connect_timeout=1.0, metadata=SimpleNamespace(all_hosts=lambda: hosts))

    def add_or_renew_pool(self, host: Any, is_host_addition: bool) -> Future[bool]:
        assert is_host_addition is False
        done: Future[bool] = Future()
        if self.fails:
            done.set_exception(ConnectionError("refused"))
        else:
            self.renewed.append(host.name)
            done.set_result(True)
        return done


def host(name: str, is_up: bool | None = True) -> Any:
    return SimpleNamespace(name=name, is_up=is_up)


def test_requests_in_quick_succession_keep_their_connections() -> None:
    clock = ManualClock()
    session = PoolRenewingSession([host("a")])
    listener = RenewAfterIdle(session, idle_s=300, clock=clock)  # type: ignore[arg-type]
    for _ in range(5):
        clock.now += 299
        listener(None)  # type: ignore[arg-type]
    assert session.renewed == []


def test_the_first_request_after_a_long_idle_waits_for_new_connections_to_every_host() -> None:
    # Given a session last used 300 s ago (a Lambda frozen meanwhile: its connections may be dead)
    clock = ManualClock()
    session = PoolRenewingSession([host("a"), host("b"), host("unknown", is_up=None), host("down", is_up=False)])
    listener = RenewAfterIdle(session, idle_s=300, clock=clock)  # type: ignore[arg-type]
    clock.now += 300
    # When a request is made
    listener(None)  # type: ignore[arg-type]
    # Then every host not known to be down got a new pool before it was sent, and the next one keeps them
    assert session.renewed == ["a", "b", "unknown"]
    clock.now += 1
    listener(None)  # type: ignore[arg-type]
    assert session.renewed == ["a", "b", "unknown"]


def test_a_pool_that_cannot_be_renewed_is_left_to_the_driver(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    listener = RenewAfterIdle(PoolRenewingSession([host("a")], fails=True), idle_s=300, clock=clock)  # type: ignore[arg-type]
    clock.now += 600
    listener(None)  # type: ignore[arg-type]  # no exception: the request goes on and fails as it would have
    assert "could not renew" in caplog.text


class RecordingCluster:
    built: list[RecordingCluster] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        RecordingCluster.built.append(self)
        self.sockopts: Any = None
        self.connect_timeout = kwargs.get("connect_timeout", 5)
        self.session = SimpleNamespace(
            listeners=[], set_keyspace=lambda name: None,
            add_request_init_listener=lambda fn: self.session.listeners.append(fn),
        )

    def connect(self) -> Any:
        self.connected_with = self.sockopts
        return self.session


def test_connect_gives_every_connection_the_liveness_options_and_the_idle_renewal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session_module, "Cluster", RecordingCluster)
    session: Any = connect(CassandraSettings(idle_refresh_s=120))
    assert session.listeners and isinstance(session.listeners[0], RenewAfterIdle)
    assert session.listeners[0]._idle_s == 120
    assert RecordingCluster.built[-1].connected_with == sockets.liveness_options()


def test_the_liveness_options_keepalive_well_under_the_350_s_idle_timeout_and_fail_within_a_request() -> None:
    options = {(level, name): value for level, name, value in sockets.liveness_options()}
    assert options[(socket.SOL_SOCKET, socket.SO_KEEPALIVE)] == 1
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux, as on Lambda
        assert options[(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)] < 350
        assert options[(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)] < CassandraSettings().request_timeout_s * 1000


def test_the_default_idle_renewal_comes_before_aws_forgets_an_idle_flow() -> None:
    assert CassandraSettings().idle_refresh_s < 350
