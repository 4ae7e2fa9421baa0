"""The store's row factory: driver-compatible rows, one class per column list."""

from __future__ import annotations

from cassandra.query import named_tuple_factory

from jobrunner.adapters.stores.rows import CachedRowFactory


def test_rows_read_like_the_drivers_own() -> None:
    factory = CachedRowFactory()
    columns = ["user_id", "job_id", "version"]
    raw = [("u1", "j1", 3), ("u2", "j2", 4)]

    rows = factory(columns, raw)

    expected = named_tuple_factory(columns, raw)
    assert [tuple(r) for r in rows] == [tuple(r) for r in expected]
    assert rows[1].job_id == "j2" and rows[1][2] == 4
    assert rows[0]._fields == ("user_id", "job_id", "version")


def test_one_class_per_column_list_is_built_once_and_reused() -> None:
    factory = CachedRowFactory()

    first = factory(["a", "b"], [(1, 2)])
    second = factory(["a", "b"], [(3, 4)])
    other = factory(["a", "c"], [(5, 6)])

    assert type(first[0]) is type(second[0])
    assert type(other[0]) is not type(first[0]) and other[0].c == 6


def test_column_names_that_are_not_identifiers_fall_back_to_the_drivers_renaming() -> None:
    factory = CachedRowFactory()

    rows = factory(["count(*)", "[applied]"], [(7, True)])

    assert tuple(rows[0]) == (7, True)
    assert rows[0].applied is True  # what the store's lightweight-transaction claim reads
    assert rows[0] == named_tuple_factory(["count(*)", "[applied]"], [(7, True)])[0]


def test_an_empty_result_set_gives_no_rows() -> None:
    assert CachedRowFactory()(["a"], []) == []
