"""Powertools metrics per thread in the local stack (``devstack.metrics``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from devstack.metrics import per_thread


def fresh() -> Metrics:
    """Metrics with a provider of their own (not the class-level sets every ``Metrics`` shares)."""
    return Metrics(provider=AmazonCloudWatchEMFProvider(namespace="Test", service="svc"))


def names(serialized: Any) -> set[str]:
    return {m["Name"] for m in serialized["_aws"]["CloudWatchMetrics"][0]["Metrics"]}


def test_a_handler_flushing_in_one_thread_takes_none_of_another_threads_metrics() -> None:
    # Given the metrics of a local stack, whose handlers run in threads of one process
    metrics = fresh()
    metrics.set_default_dimensions(stage="local")
    per_thread(metrics)
    added, flushed = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def results_handler() -> None:  # adds its metric, and is still running when the other flushes
        metrics.add_metric(name="Results_success", unit=MetricUnit.Count, value=3)
        added.set()
        flushed.wait(5)
        seen["results"] = metrics.serialize_metric_set()

    other = threading.Thread(target=results_handler)
    other.start()
    assert added.wait(5)
    # When the tick handler adds its own and flushes, in its thread
    metrics.add_metric(name="ScansDispatched", unit=MetricUnit.Count, value=8)
    seen["tick"] = metrics.serialize_metric_set()
    metrics.clear_metrics()
    flushed.set()
    other.join(5)
    # Then each flush holds its own handler's metrics only, with the shared dimensions (before, the tick's flush
    # took the results' metric, and a flush racing an add failed "dictionary changed size during iteration")
    assert names(seen["tick"]) == {"ScansDispatched"} and names(seen["results"]) == {"Results_success"}
    assert seen["tick"]["stage"] == seen["results"]["stage"] == "local"
    assert seen["tick"]["service"] == seen["results"]["service"] == "svc"


def test_the_sets_read_on_the_metrics_are_the_threads_own() -> None:
    # Given metrics per thread, with a metric added in another thread
    metrics = fresh()
    per_thread(metrics)
    other = threading.Thread(target=lambda: metrics.add_metric(name="Other", unit=MetricUnit.Count, value=1))
    other.start()
    other.join(5)
    # When this thread adds one, Then what it reads on the metrics (as a test of a handler does) is its own
    metrics.add_metric(name="Mine", unit=MetricUnit.Count, value=2)
    assert {name: metric["Value"] for name, metric in metrics.metric_set.items()} == {"Mine": [2.0]}


def test_metrics_per_thread_are_set_once_and_need_the_emf_provider() -> None:
    metrics = fresh()
    per_thread(metrics)
    provider = metrics.provider
    per_thread(metrics)
    assert metrics.provider is provider
    with pytest.raises(TypeError, match="EMF provider"):
        per_thread(Metrics(provider=object()))  # type: ignore[arg-type]
