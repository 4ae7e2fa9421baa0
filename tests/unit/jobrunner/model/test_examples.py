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
