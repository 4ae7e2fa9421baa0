"""The migration without a server: the keyspace's replication, and the table properties it sets on Keyspaces."""

from __future__ import annotations

import ast
import re
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import cql.migrate as migration
from cql.migrate import replication_for
from cql.schema import load_tables
from jobrunner.adapters.stores.cassandra_settings import CassandraSettings

if TYPE_CHECKING:
    import pytest


def test_a_single_node_keeps_its_one_replica_and_keyspaces_its_own_strategy() -> None:
    assert replication_for("cassandra") == "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    assert replication_for("keyspaces", 3, "datacenter1") == "{'class': 'SingleRegionStrategy'}"


def test_a_cluster_with_a_named_datacenter_has_its_replicas_there() -> None:
    assert replication_for("cassandra", 3, "dc1") == "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"
    assert replication_for("cassandra", 3) == "{'class': 'SimpleStrategy', 'replication_factor': 3}"


class SchemaSession:
    """A driver session on a keyspace whose tables exist already, answering the migration's schema reads as
    Amazon Keyspaces (``system_schema_mcs``) or Cassandra does; records what it is sent, and applies a change of
    client-side timestamps to the table it names."""

    def __init__(self, tables: dict[str, dict[str, dict[str, str]]]) -> None:
        #: table -> its custom properties (Keyspaces' ``system_schema_mcs.tables.custom_properties``)
        self.properties = tables
        self.sent: list[str] = []

    def set_keyspace(self, keyspace: str) -> None:
        pass

    def execute(self, statement: Any, parameters: Any = None, timeout: Any = None) -> Any:
        cql = " ".join(str(getattr(statement, "query_string", statement)).split())
        self.sent.append(cql)
        table = parameters[1] if parameters and len(parameters) > 1 else None
        if cql.startswith("SELECT status FROM system_schema_mcs.tables"):
            return Rows([SimpleNamespace(status="ACTIVE")])
        if cql.startswith("SELECT custom_properties FROM system_schema_mcs.tables"):
            return Rows([SimpleNamespace(custom_properties=self.properties[table])])
        if cql.startswith("SELECT column_name FROM system_schema.columns"):
            spec = next(t for t in load_tables() if t.name == table)
            return Rows([SimpleNamespace(column_name=c.name) for c in spec.columns])
        if cql.startswith("SELECT table_name FROM system_schema.tables"):
            return Rows([SimpleNamespace(table_name=name) for name in self.properties])
        altered = re.match(r"ALTER TABLE (\w+) WITH custom_properties = (.*)$", cql)
        if altered:
            self.properties[altered.group(1)].update(ast.literal_eval(altered.group(2)))
        return Rows([])


class Rows(list[Any]):
    def one(self) -> Any:
        return self[0] if self else None


ON_DEMAND = {"capacity_mode": {"throughput_mode": "PAY_PER_REQUEST"}}


def run_migration(monkeypatch: pytest.MonkeyPatch, session: SchemaSession, mode: str) -> list[str]:
    monkeypatch.setattr(migration, "connect", lambda settings, keyspace=True: session)
    session.cluster = SimpleNamespace(shutdown=lambda: None)  # type: ignore[attr-defined]
    return migration.migrate(CassandraSettings(mode=mode, keyspace="jobrunner_dev"))


def test_an_existing_keyspace_gets_client_side_timestamps_in_place_on_every_table(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a Keyspaces keyspace whose tables were created without client-side timestamps (rows in them)
    tables = {t.name: dict(ON_DEMAND) for t in load_tables()}
    session = SchemaSession(tables)

    # When the migration runs
    run_migration(monkeypatch, session, "keyspaces")

    # Then every table has them, turned on in place: altered, never dropped or created anew
    assert all(p["client_side_timestamps"] == {"status": "enabled"} for p in tables.values())
    assert all(p["capacity_mode"] == ON_DEMAND["capacity_mode"] for p in tables.values())
    altered = [cql for cql in session.sent if "custom_properties =" in cql]
    assert sorted(altered) == sorted(
        f"ALTER TABLE {name} WITH custom_properties = {{'client_side_timestamps': {{'status': 'enabled'}}}}"
        for name in tables)
    assert not [cql for cql in session.sent if re.match(r"(DROP|TRUNCATE|DELETE)\b", cql)]


def test_a_second_run_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = {t.name: {**ON_DEMAND, "client_side_timestamps": {"status": "enabled"}} for t in load_tables()}
    session = SchemaSession(tables)

    run_migration(monkeypatch, session, "keyspaces")

    assert [cql for cql in session.sent if cql.startswith("ALTER")] == []


def test_cassandra_is_sent_no_keyspaces_property(monkeypatch: pytest.MonkeyPatch) -> None:
    # Cassandra stamps writes with the driver's timestamps already, and would refuse Keyspaces' custom_properties
    session = SchemaSession({t.name: {} for t in load_tables()})
    monkeypatch.setattr(migration, "_sync_default_ttl", lambda session, settings, table: [])

    run_migration(monkeypatch, session, "cassandra")

    assert [cql for cql in session.sent if "custom_properties" in cql or "system_schema_mcs" in cql] == []
