"""Examples the model-based search found, kept as fixed regression cases of the same machine."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.jobrunner.model.faults import Glitch
from tests.unit.jobrunner.model.test_scheduler_model import SchedulerMachine
from tests.unit.jobrunner.model.world import Minute, Payload, Reschedule, Spec, Submit

ONCE = settings(max_examples=1, database=None, deadline=None, suppress_health_check=list(HealthCheck))


@ONCE
@given(st.none())
def test_of_two_payload_changes_landing_at_the_same_instant_the_one_written_last_is_in_effect(_: None) -> None:
    # A job every 10 s; two PATCHes of its payload at 10:00:00: the first one's write lands, then its answer
    # is 3 s slow, and the second one lands (at the same instant of the clock) and is answered first. The
    # job's payload is the second one's, which the fire of 10:00:10 carries; the reference used to order
    # changes of the same instant by their answers, and expected the first one's.
    state = SchedulerMachine()
    state.begin(segments=1, first=[Submit(spec=Spec(kind="at", seconds=0))])
    state.act(op=Reschedule(job=0, spec=Spec(kind="every", seconds=10)))
    state.time_passes(minute=Minute(second=10, ops=(
        (0, Payload(job=0, glitch=Glitch(nth=2, when="after", slow=True))), (0, Payload(job=0)))))
    state.published_only_what_is_allowed()
    state.teardown()


@ONCE
@given(st.none())
def test_a_fire_published_by_a_scan_woken_ahead_of_the_last_minute_dispatched_is_not_expected_next(_: None) -> None:
    # A job every 2 min from 10:01:50 fires at 10:05:30; the scan of 10:05 writes its next fire (10:07:30)
    # into the partition of 10:07 and wakes that one's scan, which publishes it on time, after the drain's
    # last tick (10:06). The liveness check used to expect 10:07:30 as the job's next run, not 10:09:30.
    state = SchedulerMachine()
    state.begin(segments=1, first=[Submit(spec=Spec(kind="at", seconds=0))])
    state.act(op=Submit(spec=Spec(kind="at", seconds=0)))
    state.time_passes(minute=Minute(second=0))
    state.time_passes(minute=Minute(second=0, ops=((100000, Submit(spec=Spec(kind="every", seconds=120, start=50))),)))
    state.published_only_what_is_allowed()
    state.teardown()
