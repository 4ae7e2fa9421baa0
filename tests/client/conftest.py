"""Fixtures shared by the tests of the client package (``client/jobrunner_client``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from jobrunner import telemetry

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for one test (the server's ``jobrunner.telemetry``, the span hook the local stack gives its
    workers): each span lands in the returned exporter as it ends; off again afterwards."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    telemetry.configure_exporter(exporter)
    yield exporter
    telemetry.shutdown()
