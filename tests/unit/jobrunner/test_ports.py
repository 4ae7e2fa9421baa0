"""The store ports: small, one concern each, with verbs a newcomer reads right the first time (issue 17)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from jobrunner.adapters.stores.cassandra import CassandraJobStore
from jobrunner.adapters.stores.memory import MemoryJobStore
from jobrunner.ports import HistoryStore, IdempotencyStore, JobStore, LeaseStore, ScheduledRowStore, Stores
from jobrunner.services.outcomes import Expiry, Outcomes, OutcomeStores
from jobrunner.services.reconcile import ReconcileStores
from jobrunner.services.results import ResultsService
from jobrunner.services.retire import RetireStores
from jobrunner.services.scan import ScanService, ScanStores

STORE_PORTS: tuple[type, ...] = (JobStore, ScheduledRowStore, HistoryStore, IdempotencyStore)
#: The most methods one store port may have (JobStore: its seven, the settling read of an outcome in doubt and the
#: reconciler's walk of every tenant's jobs, #31).
MAX_METHODS = 9
#: Verbs (or whole names) that a reader takes for one another: no two of a pair may stand side by side.
NEAR_HOMONYMS = [
    ("schedule", "scheduled"), ("start", "record"), ("record", "find_record"), ("complete", "finish"),
    ("complete", "conclude"), ("complete", "end"), ("finish", "end"), ("finish", "conclude"), ("get", "find"),
    ("get", "fetch"), ("drop", "delete"), ("create", "insert"),
]
SERVICES = Path(__file__).resolve().parents[3] / "layers" / "jobrunner" / "services"


def methods(port: type) -> set[str]:
    """The port's own public methods (not those of the ports it is made of)."""
    return {name for name, value in vars(port).items() if callable(value) and not name.startswith("_")}


def words(name: str) -> set[str]:
    """A method name and its verb (the first word)."""
    return {name, name.split("_")[0]}


def ports_of(declared: type) -> tuple[type, ...]:
    """The store ports a service's declared store type is made of."""
    return (declared,) if declared in STORE_PORTS else tuple(p for p in STORE_PORTS if p in declared.__mro__)


def store_calls(module: str, attribute: str) -> set[str]:
    """Every method a service module (or each module of a service package) calls on ``self.<attribute>``."""
    path = SERVICES / module
    trees = [ast.parse(p.read_text()) for p in (sorted(path.glob("*.py")) if path.is_dir() else [path])]
    return {node.attr for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute) and node.value.attr == attribute
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"}


@pytest.mark.parametrize("port", STORE_PORTS, ids=lambda p: p.__name__)
def test_each_store_port_is_small_and_documents_its_contract(port: type) -> None:
    assert 1 <= len(methods(port)) <= MAX_METHODS
    assert port.__doc__ is not None and len(port.__doc__) > 80


def test_no_method_name_is_shared_by_two_store_ports() -> None:
    # One adapter class implements all four (they share a session): a name must say which one it is.
    names = [name for port in STORE_PORTS for name in methods(port)]
    assert len(names) == len(set(names))


def test_no_two_names_of_the_store_and_lease_ports_are_near_homonyms() -> None:
    names = {name for port in (*STORE_PORTS, LeaseStore) for name in methods(port)}
    used = set().union(*(words(name) for name in names))
    assert [(a, b) for a, b in NEAR_HOMONYMS if a in used and b in used] == []


def test_stores_is_the_four_ports_and_both_adapters_implement_them() -> None:
    assert ports_of(Stores) == STORE_PORTS
    for adapter in (MemoryJobStore, CassandraJobStore):
        assert all(port in adapter.__mro__ for port in STORE_PORTS)


@pytest.mark.parametrize(("module", "attribute", "declared"), [
    ("scan", "_store", ScanStores),
    ("outcomes.py", "_store", OutcomeStores),
    ("results.py", "_store", HistoryStore),
    ("retire.py", "_store", RetireStores),
    ("calendars.py", "_jobs", JobStore),
    ("jobs", "_store", Stores),
    ("reconcile", "_store", ReconcileStores),
])
def test_each_service_declares_exactly_the_store_ports_it_calls(module: str, attribute: str, declared: type) -> None:
    calls = store_calls(module, attribute)
    ports = ports_of(declared)
    assert calls <= set().union(*(methods(port) for port in ports))  # nothing outside what it declares
    assert [port.__name__ for port in ports if not calls & methods(port)] == []  # no port it never calls


def test_the_scan_ends_timed_out_executions_without_a_results_service() -> None:
    parameters = inspect.signature(ScanService.__init__).parameters
    annotations = {name: str(parameter.annotation) for name, parameter in parameters.items()}
    assert [name for name, annotation in annotations.items() if "ResultsService" in annotation] == []
    assert "Expiry" in annotations["outcomes"] and issubclass(Outcomes, Expiry)  # what it is given is the Outcomes
    assert "ResultsService" not in inspect.getsource(inspect.getmodule(ScanService))  # type: ignore[arg-type]


def test_results_and_scan_share_one_ending_rule() -> None:
    # Both reach the one ``Outcomes``: the results service by its constructor, the scan by its ``outcomes``.
    assert "Outcomes" in str(inspect.signature(ResultsService.__init__).parameters["outcomes"].annotation)
    assert {"conclude", "expire"} <= methods(Outcomes)
