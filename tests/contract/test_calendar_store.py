"""The CalendarStore contract (jobrunner.ports.CalendarStore), on memory and on Cassandra."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from jobrunner.domain.calendars import calendar_from_dict

if TYPE_CHECKING:
    from jobrunner.domain.calendars import Calendar
    from jobrunner.ports import CalendarStore


def calendar(tenant: str, name: str, **data: object) -> Calendar:
    return calendar_from_dict(tenant, name, {"timezone": "Europe/Paris", "exclude": [{"date": "2026-12-25"}], **data})


def test_a_calendar_is_stored_whole_and_replaced_whole(calendar_store: CalendarStore) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    first = calendar(tenant, "holidays", description="public holidays",
                     exclude=[{"date": "2026-12-25", "note": "Christmas"},
                              {"from": "2027-01-08T18:00", "to": "2027-01-11T06:00"}])
    calendar_store.put(first)
    assert calendar_store.get(tenant, "holidays") == first
    # When it is replaced by one without a description and with other dates, Then nothing of the first stays
    second = calendar(tenant, "holidays", timezone="UTC", exclude=[{"from": "2027-05-01", "to": "2027-05-02"}])
    calendar_store.put(second)
    assert calendar_store.get(tenant, "holidays") == second
    assert calendar_store.get(tenant, "other") is None


def test_calendars_belong_to_their_tenant_and_list_in_name_order_page_by_page(calendar_store: CalendarStore) -> None:
    tenant, other = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    for name in ("c", "a", "e", "b", "d"):
        calendar_store.put(calendar(tenant, name))
    calendar_store.put(calendar(other, "a"))
    assert calendar_store.get(other, "b") is None  # another tenant's is never found under this one
    first = calendar_store.list(tenant, 2)
    rest = calendar_store.list(tenant, 10, after=first[-1].name)
    assert [c.name for c in first + rest] == ["a", "b", "c", "d", "e"]
    assert {c.user_id for c in first + rest} == {tenant}
    # and a delete removes one, of this tenant only; deleting it again is no error
    calendar_store.delete(tenant, "a")
    calendar_store.delete(tenant, "a")
    assert calendar_store.get(tenant, "a") is None and calendar_store.get(other, "a") is not None
