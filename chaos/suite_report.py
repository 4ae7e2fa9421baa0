"""The crash suite's report: what it counts from the ``jobs`` topic, the causes of duplicates, and the time
each fault took to recover from (``chaos.suite``)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import requests

from chaos.common import Fault, fault_table
from jobrunner.domain.schedules import parse_instant
from jobrunner.domain.segments import segment_of
from jobrunner.domain.time import MINUTE, minute_bucket, rfc3339

#: What the suite keeps of a message: execution_id, job_id, scheduled_at, published.
Seen = tuple[str, str, datetime, datetime]


@dataclass
class Report:
    plan: dict[str, Any]
    expected: int = 0
    published: int = 0
    lost: int = 0
    lost_ids: list[str] = field(default_factory=list)
    messages: int = 0
    duplicates: int = 0
    duplicate_causes: dict[str, int] = field(default_factory=dict)
    submitted: int = 0
    rejected_503: int = 0
    refused_late: int = 0
    faults: list[Fault] = field(default_factory=list)
    #: What the plan calls for and the run could not make happen (a kill with no scan to kill, a restart
    #: the API never refused a submission during): the run fails.
    unmet: list[str] = field(default_factory=list)
    max_lateness_s: float = 0.0
    #: How long submitting the plan's jobs took (before the first due minute, by ``suite.first_due_minute``).
    submit_s: float = 0.0
    wall_s: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def markdown(self) -> str:
        lines = [
            "| figure | value |", "|---|---|",
            f"| executions expected | {self.expected} |",
            f"| published (distinct execution ids) | {self.published} |",
            f"| **lost** | **{self.lost}** |",
            f"| messages on `jobs` | {self.messages} |",
            f"| duplicates (same execution_id again) | {self.duplicates} |",
            *(f"| duplicates caused by {cause} | {n} |" for cause, n in sorted(self.duplicate_causes.items())),
            f"| jobs acknowledged (201) / refused with 503 | {self.submitted} / {self.rejected_503} |",
            f"| jobs refused as submitted too late (422) | {self.refused_late} |",
            f"| latest execution, after its due instant | {self.max_lateness_s:.1f} s |",
            f"| submitting the jobs took | {self.submit_s:.0f} s |",
            f"| wall time of the suite | {self.wall_s:.0f} s |",
            f"| plan not met | {len(self.unmet)} |",
            "", *fault_table(self.faults),
            *(["", "plan not met:", "", *(f"- {text}" for text in self.unmet)] if self.unmet else []),
        ]
        return "\n".join(lines) + "\n"


def execution(_topic: str, value: dict[str, Any], published: datetime) -> Seen:
    """What the crash suite keeps of a message: execution_id, job_id, scheduled_at, published."""
    return value["execution_id"], value["job_id"], parse_instant(value["scheduled_at"], "scheduled_at"), published


@dataclass
class Tally:
    """Counts a run into its report, from what it expected and what the collector saw."""

    report: Report
    segments: int
    #: when, segment, bucket of each scan killed, in the order of their faults
    kills: list[tuple[datetime, int, datetime]]
    kafka_window: tuple[datetime, datetime] | None
    #: the API, to describe a lost execution: its URL and a token
    url: str
    token: str

    def count(self, expected: dict[tuple[str, datetime], None], seen: list[Seen]) -> None:
        report = self.report
        ids = Counter(execution_id for execution_id, *_ in seen)
        first_publish: dict[tuple[str, datetime], datetime] = {}
        for _, job, scheduled, published in seen:
            key = (job, scheduled)
            first_publish[key] = min(published, first_publish.get(key, published))
        report.expected = len(expected)
        report.published = len(set(expected) & set(first_publish))
        missing = sorted(set(expected) - set(first_publish), key=lambda k: k[1])
        report.lost = len(missing)
        report.lost_ids = [self.describe(job, at) for job, at in missing[:20]]
        report.messages = len(seen)
        report.duplicates = sum(n - 1 for n in ids.values() if n > 1)
        report.max_lateness_s = max(
            ((first_publish[k] - k[1]).total_seconds() for k in expected if k in first_publish), default=0.0
        )
        report.duplicate_causes = self.duplicate_causes(seen)
        self.recovery_times(first_publish)

    def duplicate_causes(self, seen: list[Seen]) -> dict[str, int]:
        causes: Counter[str] = Counter()
        killed = {(segment, bucket) for _, segment, bucket in self.kills}
        by_id: dict[str, list[tuple[str, datetime, datetime]]] = {}
        for execution_id, job, scheduled, published in seen:
            by_id.setdefault(execution_id, []).append((job, scheduled, published))
        for copies in by_id.values():
            if len(copies) < 2:
                continue
            job, scheduled, published = copies[0]
            partition = (segment_of(job, self.segments), minute_bucket(scheduled))
            if partition in killed or any(minute_bucket(p) != minute_bucket(scheduled) for _, _, p in copies):
                cause = "a killed scan (republished what it had sent but not yet marked done)"
            elif self.kafka_window and any(self.kafka_window[0] <= p <= self.kafka_window[1] + timedelta(seconds=30)
                                           for _, _, p in copies):
                cause = "the broker restart (acknowledgement lost, publish retried)"
            else:
                cause = "none of the suite's faults (not traced)"
            causes[cause] += len(copies) - 1
        return dict(causes)

    def describe(self, job_id: str, scheduled_at: datetime) -> str:
        """A lost execution, with what the store says of it (to find the cause)."""
        try:
            job = requests.get(f"{self.url}/jobs/{job_id}", timeout=10,
                               headers={"Authorization": f"Bearer {self.token}"}).json()
            history = requests.get(f"{self.url}/jobs/{job_id}/executions", timeout=10,
                                   headers={"Authorization": f"Bearer {self.token}"}).json()["items"]
            runs = [(h["scheduled_at"], h["status"]) for h in history]
            state = f"schedule={job['schedule']} next_run_at={job['next_run_at']} history={runs}"
        except (requests.RequestException, KeyError, ValueError) as exc:
            state = f"(could not read the job: {exc})"
        return f"{job_id}@{rfc3339(scheduled_at)} segment {segment_of(job_id, self.segments)}: {state}"

    def recovery_times(self, first_publish: dict[tuple[str, datetime], datetime]) -> None:
        """For kills and silent minutes: from the fault until the last execution it delayed was published."""
        kills = iter(self.kills)  # in the order of their faults
        for fault in self.report.faults:
            at = parse_instant(fault.at, "at")
            if fault.kind == "kill -9 scan":
                # Only the killed partition's executions: later faults (silent minutes) delay others.
                _, segment, bucket = next(kills)
                delayed = [p for (job, due), p in first_publish.items()
                           if segment_of(job, self.segments) == segment and minute_bucket(due) == bucket
                           and p > due + timedelta(seconds=5)]
                fault.recovery_s = max(((p - at).total_seconds() for p in delayed), default=0.0)
            elif fault.kind == "no tick":
                delayed = [p for (job, due), p in first_publish.items() if minute_bucket(due) == at + MINUTE]
                fault.recovery_s = max(((p - (at + MINUTE)).total_seconds() for p in delayed), default=0.0)
            elif fault.kind == "Kafka broker restart":
                delayed = [p for (job, due), p in first_publish.items()
                           if self.kafka_window and self.kafka_window[0] <= due <= self.kafka_window[1]]
                fault.recovery_s = max(((p - at).total_seconds() for p in delayed), default=0.0)
