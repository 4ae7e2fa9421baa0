"""The proof (issue #12): a model-based test of the whole scheduler.

Hypothesis drives the scheduler (memory adapters; a virtual clock on which the scans run concurrently and
reproducibly; see ``world.py``) through interleavings of user operations, worker results and minutes (a
tick and the scans it dispatches, with faults injected at any port call and operations run in the middle
of a scan), then drains it with no faults and checks it against the reference model (``reference.py``):

1. every fire owed is published (a change waives the old schedule's fires not yet published; a pause
   waives its fires unless resumed with catch-up; a payload PATCH waives nothing), or recorded not run
   for a reason its job has (excluded by its calendar, skipped by its overlap policy, dropped by its
   catch-up window; held by a buffer policy near the end); every run now too; a count of fires ends the
   schedule at its last; a job deleted after its last fire had none left;
7. a fire is published only if a version of its job's calendar it could have read allows it, and recorded
   SKIPPED only for a reason its job has (a calendar version that excluded it, its overlap policy, a miss
   under a catch-up window); under skip and the buffer policies no execution of the schedule starts while
   another has not ended, and under buffer_all fires start in the order of their fires; a cancel message
   names an execution of its job (cancel_other: published, or recorded started by a scan that then died);
2. nothing is published after its job's cancel, and no schedule fire from inside a pause window (unless
   resumed with catch-up); a message carries the payload the job had between its due instant and then;
3. every copy of one fire and attempt (of the schedule's lineage or a run now's) carries one execution_id,
   and an execution_id names one of them;
4. an execution's history record never moves backwards (nor is it overwritten by another execution's);
5. a failed attempt gets its retry, or its dead letter when none is left (retries go on while paused);
6. after the drain every active job with fires left has a next run ahead of the scans, in a live row;
8. a fire recorded SKIPPED is never published after (``skipped_published``); a catch-up window drops a
   fire as missed only when something may have delayed the scans shortly before (``missed_quietly``); a
   backfill asked for again runs no fire a second time (``backfill_again``); a message goes to the topic
   its job had then;
9. where the tenant's standing limits are counted, after the drain its count of recurring jobs held and of
   fires reserved a minute are those of the live jobs the model knows (``quota_drift``).
Checks 2 to 4, 7 and 8 run after every step; 1, 5, 6 and 9 after the drain.

Requests on one job race each other (a request runs another at its nth store call: ``Glitch`` with
``Interleave``), a compare-and-set may be accepted and committed only later (``Pending``), writes may be
slow (up to 50 s), slow then fail, or land and answer an error, and the clocks of the API, the results
function, the scans and the tick may differ within ``CLOCK_SKEW`` (``Skew``). PATCH changes any field;
bulk changes by tag, batch submits and backfills take part; a tenant's limits may refuse (429).

CI runs a small, derandomized search; ``JOBRUNNER_MODEL_EXAMPLES`` (and ``JOBRUNNER_MODEL_STEPS``) run a
longer random one, e.g. ``JOBRUNNER_MODEL_EXAMPLES=2000 JOBRUNNER_MODEL_STEPS=60 pytest <this file>`` (``make
soak``). ``JOBRUNNER_MODEL_WAIVE`` (comma-separated names of the checks above in brackets) waives checks, and
``JOBRUNNER_MODEL_WITHOUT`` (``pending``, ``racing``, ``late``) leaves request faults out, to search past a defect
already known.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.unit.jobrunner.model.faults import (
    Die,
    Fail,
    Fault,
    Glitch,
    Interleave,
    Outage,
    Pending,
    Slow,
    SlowFail,
    Unacked,
)
from tests.unit.jobrunner.model.world import (
    Backfill,
    Bulk,
    Cancel,
    Exclude,
    Minute,
    Op,
    Patch,
    Pause,
    Payload,
    Repeat,
    Reschedule,
    Result,
    Resume,
    RunNow,
    Skew,
    Spec,
    Submit,
    SubmitMany,
    Tick,
    World,
)

#: Checks waived by name (see the module's doc), to search past a defect already known.
WAIVED = frozenset(name.strip() for name in os.environ.get("JOBRUNNER_MODEL_WAIVE", "").split(",") if name.strip())
#: Kinds of request faults left out of the search ("pending", "racing", "late"), to search past a defect they find
#: at once.
LEFT_OUT = frozenset(name.strip() for name in os.environ.get("JOBRUNNER_MODEL_WITHOUT", "").split(",") if name.strip())

# -- what users and workers do ------------------------------------------------------------------------------

# End conditions: a count of fires (every, cron), the last of them the schedule's end.
fires_counts = st.none() | st.integers(1, 6)
specs = st.one_of(
    st.builds(Spec, kind=st.just("at"), seconds=st.integers(-20, 150)),
    st.builds(Spec, kind=st.just("every"), seconds=st.sampled_from([10, 20, 30, 60, 120]),
              start=st.none() | st.integers(-60, 60), fires=fires_counts),
    st.builds(Spec, kind=st.just("cron"), cron=st.sampled_from(["*/1 * * * *", "*/2 * * * *"]),
              timezone=st.sampled_from(["UTC", "Asia/Kolkata", "America/New_York"]), fires=fires_counts),
    st.builds(Spec, kind=st.just("iso8601"), seconds=st.sampled_from([10, 30, 45]), start=st.integers(-30, 60),
              count=st.integers(2, 5)),
)
jobs = st.integers(0, 5)
overlaps = st.sampled_from(["allow_all", "allow_all", "skip", "buffer_one", "buffer_all", "cancel_other"])
catch_ups = st.sampled_from([None, None, "latest", "window"])
teams = st.sampled_from([None, "a", "b"])
topics = st.sampled_from([None, None, "jobs", "jobs-b"])


def patches(glitch: st.SearchStrategy[Glitch | None]) -> st.SearchStrategy[Patch]:
    """A PATCH of a few of the job's fields (each drawn or left as it is)."""
    def maybe(values: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
        return st.none() | values

    return st.builds(
        Patch, job=jobs, schedule=st.none() | specs, payload=st.booleans(), overlap=maybe(overlaps),
        catch_up=maybe(st.sampled_from(["all", "latest", "window"])), calendar=maybe(st.booleans()),
        jitter_s=maybe(st.sampled_from([0, 5, 40])), timeout_s=maybe(st.sampled_from([0, 15, 45])),
        retries=maybe(st.integers(0, 2)), topic=maybe(st.sampled_from(["jobs", "jobs-b"])),
        delete_after_last=maybe(st.booleans()), team=maybe(st.sampled_from(["a", "b"])), glitch=glitch)


# Requests on one job that another request (without faults of its own) runs in the middle of.
racing_ops = st.one_of(
    st.builds(Resume, job=jobs, catch_up=st.booleans()),
    st.builds(Pause, job=jobs),
    st.builds(Cancel, job=jobs),
    st.builds(Payload, job=jobs),
    st.builds(Reschedule, job=jobs, spec=specs),
    patches(st.none()),
    st.builds(Bulk, action=st.sampled_from(["pause", "resume", "cancel"]), team=st.sampled_from(["a", "b"])),
    st.builds(RunNow, job=jobs),
)
# A fault on a request's first attempt: a store call fails (before or after it landed), is slow (up to 50 s: a
# PLANNED row written just over 90 s ahead then lands after its scan read the lane), slow then fails, or its
# compare-and-set is left pending (the user retrying at once or 40 s later), or another request runs there.
simple_glitches = st.builds(
    Glitch, nth=st.integers(0, 3), when=st.sampled_from(["before", "after"]), slow=st.booleans(),
    action=st.none() | st.builds(Slow, st.sampled_from([12, 35, 50])) | st.builds(SlowFail, st.sampled_from([3, 12])))
pending_glitches = st.builds(Glitch, nth=st.integers(0, 1), when=st.just("before"), target=st.just("store.update_job"),
                             action=st.just(Pending()), retry_in=st.sampled_from([0, 0, 40]))
racing_glitches = st.builds(
    Glitch, nth=st.integers(0, 2), when=st.sampled_from(["before", "after"]),
    target=st.sampled_from(["store.*", "store.update_job", "store.get_job"]), action=st.builds(Interleave, racing_ops))
# A write that lands late (a row placed for a scan that has moved on), then its placing again fails.
late_writes = st.builds(
    lambda nth, seconds, then: Glitch(nth=nth, when="before", action=Slow(seconds), then=Glitch(
        nth=nth + 1, when="before", action=then)),
    st.integers(1, 2), st.sampled_from([3, 12, 35]), st.sampled_from([Fail(), SlowFail(3)]))
glitch = st.one_of(simple_glitches, simple_glitches, *([] if "late" in LEFT_OUT else [late_writes]),
                   *([] if "pending" in LEFT_OUT else [pending_glitches]),
                   *([] if "racing" in LEFT_OUT else [racing_glitches]))
glitches = st.none() | glitch | st.builds(lambda first, then: Glitch(**{**first.__dict__, "then": then}), glitch,
                                          simple_glitches)
submits = st.builds(Submit, spec=specs, retries=st.integers(0, 2), timeout_s=st.none() | st.sampled_from([15, 45]),
                    jitter_s=st.none() | st.sampled_from([5, 40]), glitch=glitches, calendar=st.booleans(),
                    overlap=overlaps, catch_up=catch_ups, delete_after_last=st.booleans(), team=teams, topic=topics)
user_ops = st.one_of(
    submits,
    st.builds(Payload, job=jobs, glitch=glitches),
    st.builds(Reschedule, job=jobs, spec=specs, glitch=glitches),
    patches(glitches),
    st.builds(Pause, job=jobs, glitch=glitches),
    st.builds(Resume, job=jobs, catch_up=st.booleans(), glitch=glitches),
    st.builds(Cancel, job=jobs, glitch=glitches),
    st.builds(RunNow, job=jobs, glitch=glitches),
    st.builds(Bulk, action=st.sampled_from(["pause", "resume", "cancel"]), team=st.sampled_from(["a", "b"]),
              glitch=glitches),
    st.builds(SubmitMany, items=st.lists(submits, min_size=1, max_size=3).map(tuple), keyed=st.booleans(),
              glitch=glitches),
    st.builds(Backfill, job=jobs, since=st.sampled_from([30, 120, 300]), until=st.sampled_from([1, 20]),
              twice=st.booleans(), glitch=glitches),
    # The calendar the jobs may name excludes a stretch from now or soon after (or nothing)
    st.builds(Exclude, start=st.none() | st.integers(-30, 90), length=st.sampled_from([20, 45, 90]), glitch=glitches),
)
worker_ops = st.one_of(
    st.builds(Result, pick=st.integers(0, 20), fate=st.sampled_from(["success", "failure", "never"]),
              glitch=glitches),
    st.builds(Repeat, pick=st.integers(0, 20)),
    st.just(Tick()),
)
ops = st.one_of(user_ops, worker_ops)

# -- faults of the scans ------------------------------------------------------------------------------------

slow = st.builds(Slow, st.sampled_from([3, 12, 45]))  # 45 s: longer than a lease
store_targets = st.sampled_from([
    "store.get_jobs", "store.write_started", "store.settle_published", "store.lane_rows", "store.lane_rows.next",
    "store.delete_scheduled", "store.get_record", "store.get_records", "store.get_job", "store.write_outcomes",
    "store.history_page", "store.write_scheduled",
    "calendars.get",
])
store_actions = st.one_of(st.just(Fail()), st.builds(Outage, st.sampled_from([4, 15, 70])), slow, st.just(Die()),
                          st.builds(SlowFail, st.sampled_from([3, 12])))
publish_actions = st.one_of(st.builds(Unacked, st.booleans()), slow, st.just(Die()))
heartbeat_targets = st.sampled_from(["heartbeats.acquire", "heartbeats.renew", "heartbeats.mark_done",
                                     "heartbeats.beat"])
heartbeat_actions = st.one_of(st.just(Fail()), slow, st.just(Die()))
# An operation on a job runs at the nth call concerning that job: between its read, publish and completion.
interleave_targets = st.sampled_from(["store.get_jobs", "store.write_started", "publisher.publish",
                                      "store.settle_published", "store.delete_scheduled", "store.write_outcomes"])


def faults_on(targets: st.SearchStrategy[str], actions: st.SearchStrategy[object]) -> st.SearchStrategy[Fault]:
    return st.builds(Fault, scan=st.integers(0, 2), target=targets, nth=st.integers(0, 3),
                     when=st.sampled_from(["before", "after"]), action=actions)


faults = st.one_of(
    faults_on(store_targets, store_actions),
    faults_on(st.just("publisher.publish"), publish_actions),
    faults_on(heartbeat_targets, heartbeat_actions),
    faults_on(interleave_targets, st.builds(Interleave, ops)),
    # the delete of a job done after its last fire: its compare-and-set left pending
    faults_on(st.just("store.retire_job"), st.just(Pending())),
)
# A scan's completion that lands late (its next fires too late for their scans), then the scan dies before it
# places them again.
late_completions = st.builds(
    lambda scan, nth, seconds: (Fault(scan, "store.settle_published", nth, "before", Slow(seconds)),
                                Fault(scan, "store.write_scheduled", 0, "before", Die())),
    st.integers(0, 2), st.integers(0, 2), st.sampled_from([12, 45]))
# Mostly whole seconds, where fires are due; the scan of the next minute runs until about 125 s.
offsets_ms = st.one_of(st.integers(0, 125).map(lambda s: s * 1000), st.integers(0, 125_000))
minutes = st.builds(
    Minute, second=st.integers(0, 59), tick=st.sampled_from(["once", "missed", "twice"]),
    faults=st.tuples(st.lists(faults, max_size=3), st.lists(late_completions, max_size=1)).map(
        lambda drawn: (*drawn[0], *(fault for pair in drawn[1] for fault in pair))),
    ops=st.lists(st.tuples(offsets_ms, ops), max_size=3).map(tuple),
)


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None

    @initialize(segments=st.integers(1, 3), first=st.lists(submits, min_size=1, max_size=3), quotas=st.booleans(),
                skew=st.none() | st.builds(Skew, *[st.sampled_from([-250, 0, 250])] * 5), wakes=st.booleans())
    def begin(self, segments: int, first: list[Submit], quotas: bool = False, skew: Skew | None = None,
              wakes: bool = True) -> None:
        self.world = World(segments, quotas=quotas, skew=skew, wakes=wakes, waived=WAIVED)
        with self.world.step():
            for op in first:
                self.world.run_op(op)

    @rule(op=ops)
    def act(self, op: Op) -> None:
        assert self.world is not None
        with self.world.step():
            self.world.run_op(op)

    @rule(minute=minutes)
    def time_passes(self, minute: Minute) -> None:
        assert self.world is not None
        with self.world.step():
            self.world.pass_minute(minute)

    @rule(seconds=st.integers(1, 50))
    def wait(self, seconds: int) -> None:
        assert self.world is not None
        with self.world.step():
            self.world.wait(seconds)

    @rule(segments=st.integers(1, 3))
    def resegment(self, segments: int) -> None:
        assert self.world is not None
        with self.world.step():
            self.world.resegment(segments)

    @invariant()
    def published_only_what_is_allowed(self) -> None:
        if self.world is not None:
            with self.world.step():
                self.world.check_safety()

    def teardown(self) -> None:
        if self.world is None:
            return
        try:
            # Given a run that broke no check so far, when it is drained without faults, then all owed is done
            if self.world.healthy:
                with self.world.step():
                    last_bucket = self.world.drain()
                    self.world.check_liveness(last_bucket)
        finally:
            self.world.close()


LONG_RUN = "JOBRUNNER_MODEL_EXAMPLES" in os.environ
pytestmark = pytest.mark.timeout(0 if LONG_RUN else 600)  # a long search may take hours
SchedulerMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("JOBRUNNER_MODEL_EXAMPLES", "60")),
    stateful_step_count=int(os.environ.get("JOBRUNNER_MODEL_STEPS", "30")),
    deadline=None,
    derandomize=not LONG_RUN,  # CI: the same search every run, so a failure there reproduces here
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestSchedulerModel = SchedulerMachine.TestCase
