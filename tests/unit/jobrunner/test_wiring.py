"""The container: which adapters it builds, and how tracing changes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobrunner.adapters.publishers.memory import MemoryPublisher
from jobrunner.adapters.publishers.tracing import TracingPublisher
from jobrunner.config import Settings
from jobrunner.wiring import Container

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def test_without_tracing_the_publisher_is_the_one_given() -> None:
    publisher = MemoryPublisher()
    assert Container(Settings.from_env({}), publisher=publisher).publisher is publisher


def test_with_tracing_the_publisher_is_wrapped_in_spans(spans: InMemorySpanExporter) -> None:
    publisher = MemoryPublisher()
    traced = Container(Settings.from_env({}), publisher=publisher).publisher
    assert isinstance(traced, TracingPublisher) and traced.inner is publisher

