"""Sections 8 to 10 of the report: what the scan costs, counted rather than timed (the rows written per
execution, the rows read and tombstones met by short-period jobs, and the scans of idle partitions)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.report.common import table
from bench.stats import fmt, pct, spread
from bench.writes import SUBMITS

if TYPE_CHECKING:
    from bench.context import Bench


def writes_section(bench: Bench) -> list[str]:
    runs = bench.results.get("writes")
    if not runs:
        return []
    w = runs[0]
    execs = [max(r["executions"], 1) for r in runs]

    def per(values: list[float], digits: int = 2) -> str:
        return spread([v / n for v, n in zip(values, execs, strict=True)], digits)

    lines = ["## 8. Writes per execution, counted by Cassandra", "",
             f"**Workload** (per run): {w['fires']:,} executions due at the start of one minute, one-time and "
             f"recurring ({w['recurring']:,} recurring in the first run),",
             f"{w['segments']} segments, scanned by the real `ScanService`; each message read back from Kafka and "
             "answered as `jobrunner_client.worker` does,",
             f"through the real `ResultsService` on the Cassandra store: {pct(w['failures_share'])} FAILED "
             f"({w['failed_first']:,}; each job allows one retry), the rest SUCCESS; then the",
             f"next minute, holding the {w['published_retries']:,} retries, scanned and its retries answered "
             f"SUCCESS: {w['executions']:,} executions per run.",
             "**Method**: Cassandra's own per-table write counter, the `count` column of the virtual table",
             "`system_views.local_write_latency` (no JMX needed; one per partition update applied to a table),",
             "read before and after each step; the difference per table of the benchmark's keyspace. A row of a",
             "partition of its own is one update; since 2026-11-26 the store packs rows into unlogged batches, and",
             "the rows of one partition in one batch (the next fires of one minute and segment, in",
             "`task_schedule_v2`) are one update together, so Cassandra's count can be below the rows written.",
             "Seeding is not counted. *Model*: docs/scaling.md's count of rows for this mix; *driver sent*: the",
             "rows the benchmark's counting session saw written (inside batches one by one): what Amazon",
             "Keyspaces bills, a write unit per row of up to 1 KB.",
             "**Reproduce**: `python -m bench --only writes --runs 1` (`--writes-executions`, `--writes-failures`;",
             "add `--out /tmp/w.md --chart /tmp/w.png`, or it replaces docs/benchmarks.md with this section alone).",
             ""]
    tables = list(w["counted"])

    def part(run: dict[str, Any], side: str, name: str | None) -> int:
        """Rows of table ``name`` (None: every table of the keyspace) in the steps of one side, scans or results."""
        steps = ("scan", "retry scan") if side == "scans" else ("results", "retry results")
        return sum(v for step in steps for t, v in run["steps"][step].items()
                   if t == name or (name is None and "." not in t))

    rows = []
    for name in tables:
        counted = [r["counted"].get(name, 0) for r in runs]
        rows.append([f"`{name}`", per(counted), per([part(r, "scans", name) for r in runs]),
                     per([part(r, "results", name) for r in runs]),
                     per([r["expected"].get(name, 0) for r in runs]), per([r["driver"].get(name, 0) for r in runs]),
                     " ; ".join(f"{c:,}" for c in counted)])
    total = [sum(r["counted"].values()) for r in runs]
    rows.append(["**total**", "**" + per(total) + "**", per([part(r, "scans", None) for r in runs]),
                 per([part(r, "results", None) for r in runs]), per([sum(r["expected"].values()) for r in runs]),
                 per([sum(r["driver"].values()) for r in runs]), " ; ".join(f"{t:,}" for t in total)])
    for name in ("system.batches", "system.paxos"):
        rows.append([f"`{name}` (server-wide)", per([r["server"].get(name, 0) for r in runs]),
                     per([part(r, "scans", name) for r in runs]), per([part(r, "results", name) for r in runs]),
                     "", "", " ; ".join(f"{r['server'].get(name, 0):,}" for r in runs)])
    lines += table(["table", "partition updates per execution (Cassandra)", "of which scans", "of which results",
                     "model (rows)", "rows sent (driver)", "updates counted, per run"], rows)
    submits = [r["submit"] for r in runs if "submit" in r]
    if submits:
        kinds = {"one_time": "one-time", "recurring": "recurring"}
        names = sorted({t for s in submits for rows in s.values() for t in rows})
        lines += ["Rows written per job submitted (the submit path, not in the totals above): "
                  f"{SUBMITS} jobs of each kind through the real `JobService`, one request each, counted the same way:",
                  ""]
        lines += table(["job", *(f"`{t}`" for t in names), "total"], [
            [label, *(spread([s[kind].get(t, 0.0) for s in submits], 2) for t in names),
             spread([sum(s[kind].values()) for s in submits], 2)] for kind, label in kinds.items()])
    lines += _sizes(runs)
    steps = {"scan": "published_first", "results": "published_first", "retry scan": "published_retries",
             "retry results": "published_retries"}
    columns = [*tables, "system.batches"]
    lines += ["Rows counted per step (first run), and per execution of the step (keyspace tables only):", ""]
    lines += table(["step", *columns, "rows per execution of the step"], [
        [step, *(f"{w['steps'][step].get(c, 0):,}" for c in columns),
         fmt(sum(v for t, v in w["steps"][step].items() if "." not in t) / max(w[key], 1), 2)]
        for step, key in steps.items()])
    recurring = w["recurring"] / max(w["fires"], 1)
    exact = all(r["counted"].get(t, 0) == r["expected"].get(t, 0)
                for r in runs for t in {*r["counted"], *r["expected"]})
    agreement = "they equal the model's, row for row" if exact else "**not the model's**: see the errors retried below"
    lines += [f"How the figures add up ({agreement}): the first minute's scan writes",
              "`start` (the history row) and `complete` (the next row for the recurring "
              f"{pct(recurring)}; the done row is not deleted, it expires): 1 + {fmt(recurring, 2)} rows per "
              "execution.",
              "A SUCCESS result writes 1 (the history row), a FAILED one 2 (its retry row first). No execution",
              "writes the job (`job_table_v2`): a job's run fields are derived from its history. A retry",
              "execution (a row of the late lane, deleted once done) writes 2 in its scan (no next run) and 1 in",
              "its result. So an",
              f"execution that succeeds first time writes 2 + the recurring share = {fmt(2 + recurring, 2)}",
              "(docs/scaling.md: 2.5 = 2.0 task_history_v2, 0.5 task_schedule_v2; 6.5 before the redesign, with",
              "3.0 on job_table), and with a share *f* of first attempts failing once, the mean per execution is",
              "(2 + recurring share + 4 *f*) / (1 + *f*).",
              "",
              f"Logged batches sent: {w['logged_batches']:,} (none is left on the execution path; before, the scans'",
              f"`complete` and the results' `finish` were); `system.batches` took "
              f"{w['server'].get('system.batches', 0):,} writes. `system.batches`",
              "and `system.paxos` (lightweight transactions: none on this path) belong to the whole server: on",
              "shared servers they include other clients' writes. Write errors retried: " + " ; ".join(
                  f"scans {r['scan_errors']}, results {sum(sum(a.values()) for a in r['applied_again'])}"
                  for r in runs) + ".", ""]
    return lines


#: The sizes a writes run measures, for the cost model: (where in a run's results, what, its cost input).
SIZES = (
    (("stored_bytes", "history_row"), "a `task_history_v2` row of an execution, stored", "history_bytes_stored"),
    (("stored_bytes", "one_time_job_row"), "a one-time `job_table_v2` row as submitted, stored", "job_row_bytes"),
    (("result_message_bytes",), "a result message on `job-results` (key + value + headers)", "result_message_bytes"),
)


def _sizes(runs: list[dict[str, Any]]) -> list[str]:
    """The sizes the runs measured (median of each run's median; its range over every run), one line each."""
    rows = []
    for path, what, name in SIZES:
        found = [r for r in (_at(run, path) for run in runs) if r and r.get("count")]
        if found:
            rows.append([what, spread([r["median"] for r in found], 0, " B"),
                         f"{fmt(min(r['min'] for r in found), 0)}-{fmt(max(r['max'] for r in found), 0)} B",
                         f"{sum(r['count'] for r in found):,}", f"`{name}`"])
    if not rows:
        return []
    return ["Sizes, for the cost model: the rows read back once the run is done, sized as Amazon Keyspaces",
            "stores them (its row size page's rules, `bench/rowsize.py`: key columns twice, a column id per cell,",
            "100 bytes of row metadata, 8 bytes of time-to-live metadata a row and a cell, key cells included,",
            "where the table has TTL on, 40 of client-side timestamps), and each result message answered, as",
            "`jobrunner_client.worker` sends it:", "",
            *table(["what", "bytes (median)", "least-most", "counted", "cost input"], rows)]


def _at(run: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    found: Any = run
    for key in path:
        found = found.get(key) if isinstance(found, dict) else None
    return found if isinstance(found, dict) else None


def shortperiod_section(bench: Bench) -> list[str]:
    runs = bench.results.get("shortperiod")
    if not runs:
        return []
    periods = " and ".join(f"{p} s" for p in sorted({r["period_s"] for r in runs}))
    lines = ["## 9. Short-period jobs: rows read per execution, and tombstones", "",
             f"**Workload** (per run): {runs[0]['jobs']:,} jobs every *period* ({periods}) in one segment, their "
             "first fires spread over the first period of a fresh minute; that minute (*first*) and the next",
             "(*steady*: its first fires were planned into its late lane by the first minute's scan) scanned by",
             "the real `ScanService` on the real stores and Kafka, on a clock that skips the scan's sleeps (so",
             "it still polls its late lane once a simulated second). **Counted**: every row the scan's reads of ",
             "`task_schedule_v2` returned, per lane (client side), the job rows read, the tombstones the late",
             "lane's polls touched (each poll's read again, traced by Cassandra), and, once the minute is done,",
             "the live rows and tombstones a read of each whole lane touched (Cassandra's query trace: what a",
             "scan taking the partition over would read once). Code: "
             + ", ".join(sorted({f"`{r['code']}`" for r in runs})) + ".",
             "**Reproduce**: `python -m bench --only shortperiod --runs 1` (`--short-jobs`, `--short-periods`).", ""]
    lines += table(["run", "code", "period", "minute", "executions", "rows read per execution (schedule + jobs)",
                     "late-lane rows read", "planned-lane rows read", "late-lane polls", "job rows read",
                     "tombstones the late-lane polls touched",
                     "whole late lane after the minute: live / tombstones",
                     "whole planned lane: live / tombstones"], [
        [str(i + 1), f"`{r['code']}`", f"{r['period_s']} s", name, f"{m['executions']:,}",
         fmt(m["reads_per_execution"], 2), f"{m['rows_read']['LATE']:,}",
         f"{m['rows_read']['PLANNED']:,}", f"{m['reads']['LATE']:,}", f"{m['jobs_read']:,}",
         f"{m['late_poll_tombstones']:,}" if "late_poll_tombstones" in m else "not counted",
         f"{m['traced']['late']['live']:,} / {m['traced']['late']['tombstones']:,}",
         f"{m['traced']['planned']['live']:,} / {m['traced']['planned']['tombstones']:,}"]
        for i, r in enumerate(runs) for name, m in zip(("first", "steady"), r["minutes"], strict=True)])
    return lines


def idle_section(bench: Bench) -> list[str]:
    runs = bench.results.get("idle")
    if not runs:
        return []
    lines = ["## 10. Idle: scans of partitions with nothing to do", "",
             f"**Workload** (per run): {runs[0]['segments']} segments without any job, ticked at second 1 of "
             "each minute as EventBridge's rule does; every scan a tick (or a writer) asks for runs to its end",
             "on the real stores, on a clock of its own that starts at the tick and skips its sleeps, so its",
             "duration is what it would hold a Lambda invocation for. **Counted**, per (minute, segment) of the",
             "minutes after the first two (whose catch-up is left out): scan invocations, and the seconds they",
             "ran. Code: " + ", ".join(sorted({f"`{r['code']}`" for r in runs})) + ".",
             "**Reproduce**: `python -m bench --only idle --runs 1` (`--idle-segments`, `--idle-minutes`).", ""]
    lines += table(["run", "code", "minutes counted", "scan invocations per (minute, segment)",
                     "scan seconds per (minute, segment)", "longest scan (s)"], [
        [str(i + 1), f"`{r['code']}`", str(r["minutes"]), fmt(r["invocations_per_partition"], 2),
         fmt(r["scan_seconds_per_partition"], 1), fmt(r["longest_scan_s"], 1)] for i, r in enumerate(runs)])
    return lines
