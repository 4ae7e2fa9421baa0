"""cql/ against the synthesized Keyspaces tables: same tables, columns, types, key order, clustering order.

Parsed independently of the construct's code path: the expectation is read from ``cql/*.cql`` with
the parser, the actual from the template's ``AWS::Cassandra::Table`` properties.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cql.schema import load_tables

if TYPE_CHECKING:
    from tests.infra.conftest import Synthesized


def _tables(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    tables = synthesized.resources("AWS::Cassandra::Table").values()
    return {r["Properties"]["TableName"]: r["Properties"] for r in tables}


def test_every_cql_table_is_deployed_and_nothing_else(default_app: Synthesized) -> None:
    assert sorted(_tables(default_app)) == sorted(t.name for t in load_tables())


@pytest.mark.parametrize("spec", load_tables(), ids=lambda t: t.name)
def test_table_matches_cql(default_app: Synthesized, spec: Any) -> None:
    deployed = _tables(default_app)[spec.name]

    partition = [(c["ColumnName"], c["ColumnType"]) for c in deployed["PartitionKeyColumns"]]
    clustering = [(c["Column"]["ColumnName"], c["Column"]["ColumnType"], c["OrderBy"])
                  for c in deployed.get("ClusteringKeyColumns", [])]
    regular = {c["ColumnName"]: c["ColumnType"] for c in deployed.get("RegularColumns", [])}

    assert partition == [(c.name, c.type) for c in spec.partition_key]
    assert clustering == [(c.name, c.type, order) for c, order in spec.clustering]
    assert regular == {c.name: c.type for c in spec.regular}
    # a table whose rows are inserted USING TTL needs TTL turned on, which only a default does on CloudFormation
    expiring = {"task_schedule_v2", "job_table_v2"}  # job_table_v2: a job deleted after its last fire
    wanted = spec.default_time_to_live or (630_720_000 if spec.name in expiring else None)
    assert deployed.get("DefaultTimeToLive") == wanted


def test_cql_file_columns_are_all_accounted_for(default_app: Synthesized) -> None:
    # Given the column names as they appear in the raw CQL text (a check on the parser itself)
    import re

    from cql.schema import CQL_DIR, statements

    for path in sorted(CQL_DIR.glob("*.cql")):
        for statement in statements(path.read_text()):
            table = re.search(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", statement, re.IGNORECASE)
            assert table is not None
            body = statement[statement.index("(") + 1:]
            declared = {m.group(1).lower() for m in re.finditer(r"(?:^|,)\s*(\w+)\s+(?!KEY\b)\w", body)
                        if m.group(1).upper() != "PRIMARY"}
            deployed = _tables(default_app)[table.group(1).lower()]
            names = {c["ColumnName"] for c in deployed["PartitionKeyColumns"] + deployed.get("RegularColumns", [])}
            names |= {c["Column"]["ColumnName"] for c in deployed.get("ClusteringKeyColumns", [])}

            assert declared == names, path.name


def test_tables_are_on_demand_with_point_in_time_recovery_where_nothing_rebuilds_them(
        default_app: Synthesized) -> None:
    from infra.config import PITR_TABLES

    for name, table in _tables(default_app).items():
        assert table["BillingMode"] == {"Mode": "ON_DEMAND"}
        assert table["PointInTimeRecoveryEnabled"] is (name in PITR_TABLES), name
        assert table["KeyspaceName"] == "jobrunner_dev"
