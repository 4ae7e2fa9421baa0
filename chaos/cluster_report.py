"""The cluster fault suite's accounting: what each fault cost, from what the suite recorded (no servers).

- **Refused requests.** Every request the suite's clients sent (submissions, changes, reads) is recorded
  with its answer; one answered 5xx, or not at all, is refused. A fault's requests are those sent from
  its kill until the cluster had healed from it (hints delivered, replicas in sync). While two of three
  replicas are up the promise is that none is refused.
- **Lateness.** For every owed fire the operations judge found published (``chaos.ops_model``; replays
  after a resume with catch-up left out), the seconds from its due instant to its first publish. A
  fault's lateness is that of the fires due while its nodes were down; the unfaulted figure is that of
  the fires due in the calm window before the first fault.
- **Recovery.** From the restart of the killed processes until the cluster was whole again.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.operations import Report
from jobrunner.domain.time import rfc3339

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime


@dataclass(frozen=True)
class Call:
    """One request the suite sent, and its answer (status 0: none, a connection error or a timeout)."""

    route: str
    sent: datetime
    received: datetime
    status: int

    @property
    def refused(self) -> bool:
        return self.status == 0 or self.status >= 500


@dataclass
class FaultRun:
    """One fault as it happened: what was killed, and when each step of its healing came."""

    kind: str
    victims: list[str]
    start: datetime
    #: When the killed processes were started again, and when they answered.
    restarted: datetime | None = None
    back: datetime | None = None
    #: When the cluster was whole again (hints delivered, every replica in sync); None: not within the wait.
    recovered: datetime | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class FaultFigures:
    kind: str
    victims: list[str]
    at: str
    down_s: float
    requests: int
    refused: int
    refused_routes: dict[str, int]
    fires: int
    lateness_p99_s: float | None
    lateness_max_s: float | None
    recovery_s: float | None
    notes: list[str]


def percentile(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``, or None if there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def calls_in(calls: Iterable[Call], start: datetime, end: datetime) -> list[Call]:
    """The requests sent in [start, end]."""
    return [c for c in calls if start <= c.sent <= end]


def lateness_in(samples: Iterable[tuple[datetime, float]], start: datetime, end: datetime) -> list[float]:
    """The lateness of the fires due in [start, end]."""
    return [late for due, late in samples if start <= due <= end]


def figures(run: FaultRun, calls: list[Call], samples: list[tuple[datetime, float]], now: datetime) -> FaultFigures:
    """What ``run`` cost: its requests from the kill until the cluster was whole again (or ``now`` if it never
    was), and the lateness of the fires due while its processes were down."""
    restarted = run.restarted or now
    sent = calls_in(calls, run.start, run.recovered or now)
    refused: dict[str, int] = {}
    for call in sent:
        if call.refused:
            refused[call.route] = refused.get(call.route, 0) + 1
    late = lateness_in(samples, run.start, restarted)
    return FaultFigures(
        kind=run.kind, victims=run.victims, at=rfc3339(run.start), down_s=(restarted - run.start).total_seconds(),
        requests=len(sent), refused=sum(refused.values()), refused_routes=refused, fires=len(late),
        lateness_p99_s=percentile(late, 99), lateness_max_s=max(late, default=None),
        recovery_s=(run.recovered - restarted).total_seconds() if run.recovered and run.restarted else None,
        notes=run.notes,
    )


def refused_during(runs: list[FaultRun], calls: list[Call], now: datetime) -> list[str]:
    """Every request refused from a fault's kill until the cluster had healed from it."""
    return [f"{rfc3339(c.sent)} {c.route} {c.status or 'no answer'}" for c in calls
            if c.refused and any(r.start <= c.sent <= (r.recovered or now) for r in runs)]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


@dataclass
class ClusterReport(Report):
    """The operations judge's report, and the cluster's own figures beside it."""

    cluster: dict[str, Any] = field(default_factory=dict)
    startup_s: float | None = None
    requests: int = 0
    refused_requests: int = 0
    baseline: dict[str, Any] = field(default_factory=dict)
    quiet: dict[str, Any] = field(default_factory=dict)
    fault_figures: list[FaultFigures] = field(default_factory=list)
    #: The requests refused while a fault lasted, as ``sent route status``.
    refused_calls: list[str] = field(default_factory=list)
    duplicate_causes: dict[str, int] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)

    def failures(self) -> dict[str, int]:
        """The figures that must be 0: the judge's, and the requests refused while a quorum held."""
        return {**super().failures(), "requests refused during the faults": sum(f.refused for f in self.fault_figures)}

    def to_json(self) -> str:
        import json

        return json.dumps({**asdict(self), "lost": self.lost, "zombies": self.zombies, "failures": self.failures()},
                          indent=2, default=str)

    def _changes(self) -> int:
        return sum(self.acknowledged.values()) - self.acknowledged.get("submit", 0)

    def markdown(self) -> str:
        f = self.findings
        lines = [
            "| figure | value |", "|---|---|",
            f"| cluster | {self.cluster.get('cassandra', '')}; {self.cluster.get('kafka', '')} |",
            f"| cluster start (all nodes at once, until formed) | {_seconds(self.startup_s)} |",
            f"| executions owed / published (scheduled fires, one-time jobs included) | "
            f"{f['expected']} / {f['published']} |",
            f"| retries owed / published | {f['retries_owed']} / {f['retries_published']} |",
            f"| **lost** (fires + retries) | **{self.lost}** |",
            f"| duplicates (same `execution_id` again) | {f['duplicates']}"
            + (f" ({', '.join(f'{c}: {n}' for c, n in sorted(self.duplicate_causes.items()))})"
               if self.duplicate_causes else "") + " |",
            f"| API requests sent / **refused (5xx or no answer) during the faults** | {self.requests} / "
            f"**{sum(x.refused for x in self.fault_figures)}** |",
            f"| lateness p99 / max, unfaulted (before the first fault) | {_seconds(self.baseline.get('p99_s'))} / "
            f"{_seconds(self.baseline.get('max_s'))} ({self.baseline.get('fires', 0)} fires) |",
            f"| lateness p99 / max, quiet window (after the faults) | {_seconds(self.quiet.get('p99_s'))} / "
            f"{_seconds(self.quiet.get('max_s'))} ({self.quiet.get('fires', 0)} fires) |",
            f"| stale jobs / zombies / fired while paused / strays | {self.stale} / {self.zombies} / "
            f"{len(f['paused_fires'])} / {len(f['strays'])} |",
            f"| changes acknowledged / 409 answers | {self._changes()} / {sum(self.conflicts.values())} |",
            f"| wall time of the suite | {self.wall_s:.0f} s |",
            "",
            "| fault | killed | down | requests / refused | fires due while down | lateness p99 / max "
            "| recovery after the restart | how it healed |",
            "|---|---|---|---|---|---|---|---|",
            *(f"| {x.kind} | {', '.join(x.victims)} | {x.down_s:.0f} s | {x.requests} / {x.refused}"
              + (f" ({', '.join(f'{r} {n}' for r, n in sorted(x.refused_routes.items()))})" if x.refused else "")
              + f" | {x.fires} | {_seconds(x.lateness_p99_s)} / {_seconds(x.lateness_max_s)} | "
              f"{_seconds(x.recovery_s)} | {'; '.join(x.notes)} |" for x in self.fault_figures),
        ]
        if self.left_out:
            lines += ["", *(f"Left out: {reason}" for reason in self.left_out)]
        examples = [("refused during the faults", self.refused_calls),
                    ("lost", f["lost"] + f["retries_lost"]), ("stale", self.stale_ids), ("zombies", f["zombies"]),
                    ("strays", f["strays"]), ("unexpected answers", self.unexpected_answers)]
        for name, items in examples:
            if items:
                lines += ["", f"{name} (first {min(len(items), 10)} of {len(items)}):", "",
                          *(f"- `{item}`" for item in items[:10])]
        return "\n".join(lines) + "\n"
