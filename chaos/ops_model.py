"""The operations suite's judge: what every job owed, from the answers the API acknowledged, against what was published.

A pure function of what the suite recorded (no servers), so that its rules can be read in one place:

- An acknowledged change (2xx) is the truth. Changes are ordered by the job ``version`` their answers
  carry; a change takes effect at the instant it is acknowledged.
- A schedule change, a pause, a resume and a cancel start a new *regime*: an ACTIVE regime owes the
  fires of its schedule from the answer's ``next_run_at`` on; PAUSED and CANCELLED regimes owe none.
  A payload-only PATCH changes no fire time.
- A fire due less than ``GRACE`` before the next change was sent may be waived by it (the scan may
  not have published it yet when the change landed); one due more than ``LOST_AFTER`` before it is
  owed. In between, the change waived a fire that was already overdue: reported, apart from the lost.
  After a write outage, the fires due during it may be waived by the first changes acknowledged after
  it. Fires replayed by a resume with catch-up are wanted one after another from the resume on.
- A fire may still be published up to ``RACE`` after the change that ended its regime was
  acknowledged (the scan read the job just before the change).
- A change whose answer was a 5xx or no answer (a timeout) has an unknown outcome: until the next
  acknowledged change of that job, its fires are neither owed nor judged.
- Published: a zombie is anything published for a job after its cancel was acknowledged (retries
  included); a paused job may publish retries but no scheduled fire; a stray is a fire time that no
  acknowledged schedule of the job has.
- A retry is owed for every execution the test worker failed (or never reported) by the end of the
  quiet window, unless the job was cancelled meanwhile.
- Fires of the jobs on the unpublishable topic are owed either on that topic or, once it refuses
  records, on the dead-letter topic (those due before the quiet window: a dead letter comes only after
  several refused attempts).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from jobrunner.domain.schedules import Schedule, parse_instant, schedule_from_dict
from jobrunner.domain.time import rfc3339, utc

#: A fire due less than this before a change was sent may be waived by the change.
GRACE = timedelta(seconds=10)
#: A fire of the regime a change ended may be published up to this long after the change's answer.
RACE = timedelta(seconds=10)
#: After a write outage, changes sent within this long after it may waive the fires due during it.
OUTAGE_GRACE = timedelta(seconds=60)
#: Within this long after a payload PATCH was acknowledged, a fire may still carry the old payload.
PAYLOAD_MARGIN = timedelta(seconds=5)
#: A retry is no longer owed if the job's cancel was acknowledged within this long after the failure.
RETRY_SLACK = timedelta(seconds=60)
#: A fire (a retry) still unpublished this long after it was wanted is lost even if a change (a cancel)
#: came later; between the grace (slack) and this, the change waived a fire that was already overdue.
LOST_AFTER = timedelta(seconds=120)
RETRY_LOST_AFTER = timedelta(seconds=180)
#: A resume with catch-up replays the missed fires one after another, about this far apart at most.
CATCH_UP_PACE = timedelta(seconds=2)
#: A fire published later than this after its due instant counts as late.
LATE = timedelta(seconds=5)

#: Changes that start a new regime (a payload-only PATCH does not).
BOUNDARIES = frozenset({"submit", "schedule", "pause", "resume", "catch_up", "cancel"})


@dataclass(frozen=True)
class Answer:
    """An acknowledged (2xx) answer to a request that changes a job, with the job as it gave it."""

    job_id: str
    kind: str  # submit, payload, schedule, pause, resume, catch_up, cancel
    sent: datetime
    received: datetime
    job: dict[str, Any]

    @property
    def version(self) -> int:
        return int(self.job["version"])


@dataclass(frozen=True)
class Doubt:
    """A change answered with a 5xx or not at all: it may or may not have happened."""

    job_id: str
    kind: str
    sent: datetime
    received: datetime
    body: Any = None


@dataclass(frozen=True)
class Message:
    """One message on the jobs topic, the unpublishable topic or the dead-letter topic."""

    topic: str
    execution_id: str
    job_id: str
    scheduled_at: datetime
    attempt: int
    trigger: str
    payload: Any
    published: datetime


@dataclass(frozen=True)
class Handled:
    """What the test worker did with an execution: ``ok``, ``failed`` (reported FAILED) or ``silent``."""

    execution_id: str
    job_id: str
    scheduled_at: datetime
    attempt: int
    outcome: str
    at: datetime


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    def __contains__(self, instant: datetime) -> bool:
        return self.start <= instant <= self.end


@dataclass(frozen=True)
class Run:
    """Everything the suite recorded, and the windows of its phases."""

    answers: list[Answer]
    doubts: list[Doubt]
    messages: list[Message]
    handled: list[Handled]
    #: The jobs on the unpublishable topic, and when it started refusing records.
    void_jobs: frozenset[str]
    void_at: datetime | None
    #: The other jobs in the segments of the void jobs (their scans meet the refused records).
    neighbours: frozenset[str]
    outage: Window | None
    quiet: Window
    #: max retries of each job that has some
    max_retries: dict[str, int] = field(default_factory=dict)
    dead_letter_topic: str = "job-dlq"


@dataclass
class Findings:
    expected: int = 0
    published: int = 0
    lost: list[str] = field(default_factory=list)
    waived: int = 0
    #: Fires and retries a change waived though they were already overdue (late, not lost).
    overdue_waived: list[str] = field(default_factory=list)
    duplicates: int = 0
    zombies: list[str] = field(default_factory=list)
    paused_fires: list[str] = field(default_factory=list)
    strays: list[str] = field(default_factory=list)
    unjudged: int = 0
    retries_owed: int = 0
    retries_published: int = 0
    retries_lost: list[str] = field(default_factory=list)
    void_expected: int = 0
    void_published: int = 0
    void_dead_lettered: int = 0
    void_lost: list[str] = field(default_factory=list)
    unexpected_dead_letters: list[str] = field(default_factory=list)
    void_segment_fires: int = 0
    void_segment_lost: int = 0
    void_segment_max_lateness_s: float = 0.0
    lost_updates: list[str] = field(default_factory=list)
    changes_after_cancel: list[str] = field(default_factory=list)
    stale_payloads_during_ops: list[str] = field(default_factory=list)
    quiet_live_jobs: int = 0
    quiet_expected: int = 0
    quiet_published: int = 0
    quiet_late: int = 0
    quiet_stale_payloads: list[str] = field(default_factory=list)
    quiet_silent_jobs: list[str] = field(default_factory=list)
    max_lateness_ops_s: float = 0.0
    max_lateness_outage_s: float = 0.0
    max_lateness_quiet_s: float = 0.0
    outage_fires: int = 0
    outage_published_by_s: float | None = None
    #: Each owed fire published on time or late, outside the catch-up and the unpublishable topic's segments:
    #: (due instant, seconds from it to the first publish), for lateness by time window (``chaos.cluster``).
    lateness: list[tuple[datetime, float]] = field(default_factory=list)
    #: The state each job must be in now, from its acknowledged changes (None: unknown).
    final_states: dict[str, str | None] = field(default_factory=dict)
    latest_payloads: dict[str, Any] = field(default_factory=dict)


@dataclass
class Regime:
    state: str
    sent: datetime
    received: datetime
    first: datetime | None
    schedule: Schedule | None
    end_sent: datetime | None = None
    end_received: datetime | None = None
    #: Started by the job's submission: its fires are owed from its creation, none is a catch-up replay.
    from_submit: bool = False

    def has_fire(self, instant: datetime) -> bool:
        if self.state != "ACTIVE" or self.first is None or self.schedule is None or instant < self.first:
            return False
        if self.end_received is not None and instant > self.end_received:
            return False
        return instant == self.first or self.schedule.next_fire_after(instant - timedelta(milliseconds=1)) == instant

    def fires(self, until: datetime) -> list[datetime]:
        out: list[datetime] = []
        instant = self.first if self.state == "ACTIVE" else None
        while instant is not None and instant <= until:
            out.append(instant)
            assert self.schedule is not None
            instant = self.schedule.next_fire_after(instant)
        return out


class JobHistory:
    """One job's acknowledged changes as regimes, its doubtful windows and its payloads by version."""

    def __init__(self, job_id: str, answers: list[Answer], doubts: list[Doubt], findings: Findings) -> None:
        self.job_id = job_id
        by_version: dict[int, list[Answer]] = defaultdict(list)
        for answer in answers:
            by_version[answer.version].append(answer)
        self.payloads: dict[int, Any] = {}
        #: When each version was first seen acknowledged.
        self.received = {version: min(a.received for a in same) for version, same in by_version.items()}
        self.cancelled_at: datetime | None = None
        cancel_version: int | None = None
        self.regimes: list[Regime] = []
        for version in sorted(by_version):
            same = by_version[version]
            bodies = {_canonical(a.job) for a in same}
            if len(bodies) > 1:
                findings.lost_updates.append(f"{job_id} v{version}: {len(bodies)} different jobs acknowledged")
            job = same[0].job
            self.payloads[version] = job["payload"]
            if cancel_version is not None:
                findings.changes_after_cancel.append(
                    f"{job_id} v{version} ({'/'.join(sorted({a.kind for a in same}))}) after the cancel of "
                    f"v{cancel_version}, state {job['state']}")
                continue
            kinds = {a.kind for a in same}
            if not kinds & BOUNDARIES and self.regimes:
                continue
            sent, received = min(a.sent for a in same), min(a.received for a in same)
            if self.regimes:
                self.regimes[-1].end_sent, self.regimes[-1].end_received = sent, received
            schedule = schedule_from_dict(job["schedule"]) if job["state"] == "ACTIVE" else None
            first = _instant(job.get("next_run_at"))
            created = _instant(job.get("created_at")) if "submit" in kinds else None
            if created is not None:
                # A submission acknowledged only when sent again (the first answer was lost) reports the
                # job as it stands then, perhaps after some fires: those are owed from its creation.
                sent = min(sent, created)
                first = schedule.first_fire(created) if schedule is not None else first
            self.regimes.append(Regime(job["state"], sent, received, first, schedule, from_submit=created is not None))
            if job["state"] == "CANCELLED":
                self.cancelled_at, cancel_version = received, version
        self.windows = _doubt_windows(doubts, answers)
        self.doubt_payloads = [d.body["payload"] for d in doubts if isinstance(d.body, dict) and "payload" in d.body]

    @property
    def final_state(self) -> str | None:
        return self.regimes[-1].state if self.regimes else None

    @property
    def latest_payload(self) -> Any:
        return self.payloads[max(self.payloads)] if self.payloads else None

    def in_doubt(self, *instants: datetime) -> bool:
        return any(instant in window for window in self.windows for instant in instants)

    def regime_at(self, instant: datetime) -> Regime | None:
        current = None
        for regime in self.regimes:
            if regime.received <= instant:
                current = regime
        return current

    def legitimate(self, scheduled_at: datetime, published: datetime) -> bool:
        """A scheduled fire published at ``published`` belongs to a regime that could be in effect then."""
        for regime in self.regimes:
            ends = regime.end_received
            in_effect = published >= regime.sent and (ends is None or published <= ends + RACE)
            if in_effect and regime.has_fire(scheduled_at):
                return True
        return False

    def allowed_payloads(self, published: datetime) -> list[Any]:
        """The payloads a fire published at ``published`` may carry: the one acknowledged last before it
        (by more than ``PAYLOAD_MARGIN``), any acknowledged since, and any of a change in doubt."""
        known = [version for version, at in self.received.items() if at <= published - PAYLOAD_MARGIN]
        floor = max(known, default=min(self.payloads, default=0))
        return [p for v, p in self.payloads.items() if v >= floor] + self.doubt_payloads


def judge(run: Run) -> Findings:
    findings = Findings()
    answers: dict[str, list[Answer]] = defaultdict(list)
    for answer in run.answers:
        answers[answer.job_id].append(answer)
    doubts: dict[str, list[Doubt]] = defaultdict(list)
    for doubt in run.doubts:
        doubts[doubt.job_id].append(doubt)
    histories = {}
    for job_id in answers:
        history = JobHistory(job_id, answers[job_id], doubts[job_id], findings)
        histories[job_id] = history
        findings.final_states[job_id] = None if history.in_doubt(run.quiet.end) else history.final_state
        findings.latest_payloads[job_id] = history.latest_payload

    on_jobs = [m for m in run.messages if m.topic != run.dead_letter_topic]
    dead = [m for m in run.messages if m.topic == run.dead_letter_topic]
    first_publish: dict[tuple[str, datetime], datetime] = {}
    for m in on_jobs:
        if m.trigger == "SCHEDULE":
            key = (m.job_id, m.scheduled_at)
            first_publish[key] = min(m.published, first_publish.get(key, m.published))
    copies = Counter(m.execution_id for m in on_jobs)
    findings.duplicates = sum(n - 1 for n in copies.values() if n > 1)

    _judge_messages(run, histories, on_jobs, findings)
    owed = _owed_fires(run, histories)
    _count_fires(run, owed, first_publish, dead, findings)
    _judge_quiet_window(run, histories, on_jobs, owed, first_publish, findings)
    _judge_retries(run, histories, on_jobs, findings)
    for m in dead:
        if m.job_id not in run.void_jobs:
            findings.unexpected_dead_letters.append(f"{m.job_id}@{rfc3339(m.scheduled_at)} attempt {m.attempt}")
    return findings


def _judge_messages(run: Run, histories: dict[str, JobHistory], messages: list[Message], findings: Findings) -> None:
    for m in messages:
        history = histories.get(m.job_id)
        if history is None:
            continue
        what = f"{m.job_id}@{rfc3339(m.scheduled_at)} {m.trigger} attempt {m.attempt} published {rfc3339(m.published)}"
        if history.cancelled_at is not None and m.published > history.cancelled_at + RACE:
            findings.zombies.append(f"{what}, cancel acknowledged {rfc3339(history.cancelled_at)}")
            continue
        if m.trigger != "SCHEDULE":
            continue
        if not history.legitimate(m.scheduled_at, m.published):
            if history.in_doubt(m.scheduled_at, m.published):
                findings.unjudged += 1
                continue
            regime = history.regime_at(m.published)
            state = regime.state if regime else "unknown"
            if state == "CANCELLED":
                findings.zombies.append(f"{what}, cancelled")
            elif state == "PAUSED":
                findings.paused_fires.append(f"{what}, paused since {rfc3339(regime.received) if regime else '?'}")
            else:
                findings.strays.append(f"{what}, no acknowledged schedule has this fire")
        if m.published not in run.quiet and m.payload not in history.allowed_payloads(m.published):
            findings.stale_payloads_during_ops.append(f"{what}: payload {m.payload}")


class Owed(NamedTuple):
    phase: str  # ops, outage, quiet, catch-up; optional (may be waived), overdue (waived though overdue)
    #: When the fire was wanted: its due instant, or the resume that replays it (catch-up).
    wanted: datetime


def _owed_fires(run: Run, histories: dict[str, JobHistory]) -> dict[tuple[str, datetime], Owed]:
    """Every fire owed up to the end of the quiet window, with the phase it fell in."""
    owed: dict[tuple[str, datetime], Owed] = {}
    for job_id, history in histories.items():
        for regime in history.regimes:
            limit = regime.end_sent or run.quiet.end
            replayed = 0
            for fire in regime.fires(min(limit, run.quiet.end)):
                wanted = fire
                replay = fire < regime.received and not regime.from_submit
                if replay:
                    wanted = regime.received + CATCH_UP_PACE * replayed
                    replayed += 1
                ended = regime.end_sent
                waivable = ended is not None and (
                    wanted > ended - GRACE
                    or (run.outage is not None and run.outage.start - GRACE <= fire <= run.outage.end
                        and ended <= run.outage.end + OUTAGE_GRACE))
                if waivable or history.in_doubt(fire):
                    owed.setdefault((job_id, fire), Owed("optional", wanted))
                    continue
                if ended is not None and wanted > ended - LOST_AFTER:
                    owed.setdefault((job_id, fire), Owed("overdue", wanted))
                    continue
                if fire in run.quiet:
                    phase = "quiet"
                elif run.outage is not None and run.outage.start <= fire <= run.outage.end:
                    phase = "outage"
                else:
                    phase = "ops"
                if replay:
                    phase = "catch-up"  # replayed after a resume with catch-up: late by design
                owed[(job_id, fire)] = Owed(phase, wanted)
    return owed


def _count_fires(run: Run, owed: dict[tuple[str, datetime], Owed], first_publish: dict[tuple[str, datetime], datetime],
                 dead: list[Message], findings: Findings) -> None:
    dead_lettered = {(m.job_id, m.scheduled_at) for m in dead}
    void_segment_lateness: list[float] = []
    outage_published: list[datetime] = []
    for (job_id, fire), fire_owed in sorted(owed.items(), key=lambda item: item[0][1]):
        published = first_publish.get((job_id, fire))
        phase = _counted_phase(job_id, fire, fire_owed, published, findings)
        if phase is None:
            continue
        if job_id in run.void_jobs:
            _count_void_fire(run, job_id, fire, published, dead_lettered, findings)
            continue
        findings.expected += 1
        neighbour = job_id in run.neighbours and run.void_at is not None and fire_owed.wanted >= run.void_at
        if neighbour:
            findings.void_segment_fires += 1
        if published is None:
            where = ", a segment of the unpublishable topic" if neighbour else ""
            findings.lost.append(f"{job_id}@{rfc3339(fire)} ({phase}{where})")
            findings.void_segment_lost += neighbour
            continue
        findings.published += 1
        lateness = (published - fire).total_seconds()
        if neighbour:  # its scan met the unpublishable topic: counted apart
            if phase != "catch-up":
                void_segment_lateness.append(lateness)
            continue
        _count_lateness(phase, fire, published, lateness, outage_published, findings)
    findings.outage_fires = len(outage_published)
    if run.outage is not None and outage_published:
        # The outage ends when nodetool returns; writes came back a little before, so never below 0.
        findings.outage_published_by_s = max(0.0, (max(outage_published) - run.outage.end).total_seconds())
    findings.void_segment_max_lateness_s = max(void_segment_lateness, default=0.0)


def _counted_phase(job_id: str, fire: datetime, owed: Owed, published: datetime | None,
                   findings: Findings) -> str | None:
    """The phase a fire is judged in, or None if it is not counted: optional (waived unless published), or
    overdue and never published (waived, and named)."""
    phase, wanted = owed
    if phase == "optional":
        findings.waived += published is None
        return None
    if phase == "overdue":
        if published is None:
            findings.overdue_waived.append(f"{job_id}@{rfc3339(fire)}")
            return None
        return "catch-up" if wanted > fire else "ops"
    return phase


def _count_void_fire(run: Run, job_id: str, fire: datetime, published: datetime | None,
                     dead_lettered: set[tuple[str, datetime]], findings: Findings) -> None:
    """A fire of a job on the unpublishable topic: published, dead-lettered or lost."""
    if fire > run.quiet.start:  # dead-lettering takes several attempts: the drain may end first
        return
    findings.void_expected += 1
    if published is not None:
        findings.void_published += 1
    elif (job_id, fire) in dead_lettered:
        findings.void_dead_lettered += 1
    else:
        findings.void_lost.append(f"{job_id}@{rfc3339(fire)}")


def _count_lateness(phase: str, fire: datetime, published: datetime, lateness: float,
                    outage_published: list[datetime], findings: Findings) -> None:
    """A published fire's lateness, in the phase it was due in (catch-up fires are late by design)."""
    if phase != "catch-up":
        findings.lateness.append((fire, lateness))
    if phase == "outage":
        findings.max_lateness_outage_s = max(findings.max_lateness_outage_s, lateness)
        outage_published.append(published)
    elif phase == "quiet":
        findings.max_lateness_quiet_s = max(findings.max_lateness_quiet_s, lateness)
    elif phase == "ops":
        findings.max_lateness_ops_s = max(findings.max_lateness_ops_s, lateness)


def _judge_quiet_window(run: Run, histories: dict[str, JobHistory], messages: list[Message],
                        owed: dict[tuple[str, datetime], Owed], first_publish: dict[tuple[str, datetime], datetime],
                        findings: Findings) -> None:
    live = {job_id for job_id, state in findings.final_states.items() if state == "ACTIVE"} - run.void_jobs
    findings.quiet_live_jobs = len(live)
    fired: set[str] = set()
    for (job_id, fire), (phase, _) in owed.items():
        if phase != "quiet" or job_id not in live:
            continue
        findings.quiet_expected += 1
        published = first_publish.get((job_id, fire))
        if published is not None:
            findings.quiet_published += 1
            fired.add(job_id)
            if published - fire > LATE:
                findings.quiet_late += 1
    findings.quiet_silent_jobs = sorted(live - fired)
    for m in messages:
        if m.job_id in live and m.trigger == "SCHEDULE" and m.scheduled_at in run.quiet:
            latest = histories[m.job_id].latest_payload
            if m.payload != latest:
                findings.quiet_stale_payloads.append(
                    f"{m.job_id}@{rfc3339(m.scheduled_at)}: payload {m.payload}, latest acknowledged {latest}")


def _judge_retries(run: Run, histories: dict[str, JobHistory], messages: list[Message], findings: Findings) -> None:
    published = {(m.job_id, m.scheduled_at, m.attempt) for m in messages}
    owed = {(h.job_id, h.scheduled_at, h.attempt + 1): h for h in run.handled
            if h.outcome in ("failed", "silent") and h.attempt <= run.max_retries.get(h.job_id, 0)
            and h.at <= run.quiet.end}
    for (job_id, scheduled_at, attempt), handled in sorted(owed.items(), key=lambda item: item[1].at):
        history = histories.get(job_id)
        cancelled = history.cancelled_at if history else None
        if cancelled is not None and cancelled <= handled.at + RETRY_SLACK:
            continue
        came = (job_id, scheduled_at, attempt) in published
        if not came and cancelled is not None and cancelled <= handled.at + RETRY_LOST_AFTER:
            findings.overdue_waived.append(f"{job_id}@{rfc3339(scheduled_at)} attempt {attempt}")
            continue
        findings.retries_owed += 1
        if came:
            findings.retries_published += 1
        else:
            findings.retries_lost.append(
                f"{job_id}@{rfc3339(scheduled_at)} attempt {attempt} (attempt {attempt - 1} {handled.outcome} "
                f"at {rfc3339(handled.at)})")


def save(run: Run, path: Path) -> None:
    """Write what a run recorded, to judge it again or tell a job's story (``python -m chaos.ops_model``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(run), default=_encode))


def load(path: Path) -> Run:
    data = json.loads(path.read_text())

    def instants(item: dict[str, Any]) -> dict[str, Any]:
        return {k: _decode(k, v) for k, v in item.items()}

    windows = {k: Window(**instants(data[k])) if data[k] else None for k in ("outage", "quiet")}
    quiet = windows["quiet"]
    assert quiet is not None
    return Run(answers=[Answer(**instants(a)) for a in data["answers"]],
               doubts=[Doubt(**instants(d)) for d in data["doubts"]],
               messages=[Message(**instants(m)) for m in data["messages"]],
               handled=[Handled(**instants(h)) for h in data["handled"]],
               void_jobs=frozenset(data["void_jobs"]), void_at=_decode("at", data["void_at"]),
               neighbours=frozenset(data["neighbours"]), outage=windows["outage"], quiet=quiet,
               max_retries=data["max_retries"], dead_letter_topic=data["dead_letter_topic"])


def story(run: Run, job_id: str) -> list[str]:
    """One job's acknowledged changes, changes in doubt, regimes and messages, in time order."""
    events = [(a.received, f"answer {a.kind} v{a.version} sent {rfc3339(a.sent)}: {a.job['state']} "
                           f"{a.job['schedule']} next_run_at {a.job.get('next_run_at')} payload {a.job['payload']}")
              for a in run.answers if a.job_id == job_id]
    events += [(d.received, f"doubt {d.kind} sent {rfc3339(d.sent)} body {d.body}") for d in run.doubts
               if d.job_id == job_id]
    events += [(m.published, f"message {m.topic} {m.trigger} attempt {m.attempt} scheduled {rfc3339(m.scheduled_at)}"
                             f" payload {m.payload}") for m in run.messages if m.job_id == job_id]
    events += [(h.at, f"worker {h.outcome} attempt {h.attempt} scheduled {rfc3339(h.scheduled_at)}")
               for h in run.handled if h.job_id == job_id]
    history = JobHistory(job_id, [a for a in run.answers if a.job_id == job_id],
                         [d for d in run.doubts if d.job_id == job_id], Findings())
    lines = [f"{rfc3339(at)}  {text}" for at, text in sorted(events, key=lambda e: e[0])]
    lines += [f"regime {r.state} from {rfc3339(r.received)} first {r.first and rfc3339(r.first)} "
              f"until {r.end_received and rfc3339(r.end_received)}" for r in history.regimes]
    return lines


def _encode(value: object) -> object:
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, frozenset):
        return sorted(value)
    raise TypeError(f"cannot encode {type(value).__name__}")


def _decode(key: str, value: Any) -> Any:
    if key in ("sent", "received", "scheduled_at", "published", "at", "start", "end") and isinstance(value, str):
        return parse_instant(value, key)
    return value


def _doubt_windows(doubts: list[Doubt], answers: list[Answer]) -> list[Window]:
    """From a doubtful change until the next acknowledged change of the job that was sent after it."""
    windows = []
    for doubt in doubts:
        later = [a.received for a in answers if a.sent >= doubt.received]
        end = min(later) if later else datetime.max.replace(tzinfo=doubt.sent.tzinfo)
        windows.append(Window(doubt.sent - GRACE, end))
    return windows


def _instant(value: str | None) -> datetime | None:
    return utc(parse_instant(value, "instant")) if value else None


def _canonical(job: dict[str, Any]) -> str:
    """The fields a change sets (``next_run_at`` also moves with every fire, under the same version)."""
    return json.dumps({k: job.get(k) for k in ("state", "schedule", "payload")}, sort_keys=True)


def main() -> None:
    """``python -m chaos.ops_model RUN.json [JOB_ID]``: judge a recorded run again, or tell one job's story."""
    import sys

    run = load(Path(sys.argv[1]))
    if len(sys.argv) > 2:
        print("\n".join(story(run, sys.argv[2])))
    else:
        print(json.dumps(asdict(judge(run)), indent=2, default=_encode))


if __name__ == "__main__":
    main()
