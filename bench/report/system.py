"""Sections 11 and 12 of the report and the profile: the whole local system under load (full stack), the
fairness between tenants, and where the scan's CPU goes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bench.report.common import ceiling_rates, paired_ratios, table
from bench.stats import fmt, median, pct, spread

if TYPE_CHECKING:
    from bench.context import Bench


def fullstack_section(bench: Bench) -> list[str]:
    fs = bench.results.get("fullstack")
    if not fs or not fs.get("runs"):
        return []
    runs = fs["runs"]
    writes, produce = ceiling_rates(bench, "writes"), ceiling_rates(bench, "produce")
    drain = [r["drain_rate"] for r in runs]
    lines = ["## 11. Full stack: submitted over HTTP, drained by the whole local system", "",
             f"**Workload** (per run): {fs['executions']:,} one-time jobs (`echo`) submitted with `POST /jobs` over "
             f"HTTP by {fs['threads']} client threads, all due at one second S, "
             + ("5 s into a minute that begins at least\n100 s after the submissions end (so every row is in its "
                "minute's planned lane before the tick that\ndispatches the minute)." if fs.get("lead_s") is None else
                f"about {fmt(fs['lead_s'], 0)} s after the submissions end (`--fullstack-lead`: every row in its "
                "minute's late lane, woken scans).")
             + " **System**: `devstack.stack.LocalStack` in the bench process, as `make run`",
             "runs it: the API, the minute ticker, the results loop and the example worker (its printing "
             "discarded) in the bench process, "
             + (f"and {fs['environments']} warm environment processes (`devstack.environments`, "
                "`--fullstack-environments`) that run the scans and serve the API beside it, as Lambda runs "
                f"concurrent invocations ({fs['segments']} segments)," if fs.get("environments") else
                f"and the scans on its thread pool ({fs['segments']} segments), all in that one process,"),
             "on a keyspace, topics and a heartbeat table of the run's own.",
             "**Measured** from S: the CreateTime of each execution's message on the jobs",
             "topic (drain rate = executions ÷ (last publish - S); lateness = CreateTime - S, so its first value",
             "is how long the scans took to publish anything at all), of each result",
             "on the results topic (end to end = results ÷ (last result - S)), and when every execution was",
             "recorded (the results function's committed offsets, then SUCCESS confirmed in the store). The",
             "topics are read back afterwards, so measuring costs the run nothing. Ceilings: the raw single-row",
             "writes/s and produce/s of section 4, same run (an execution here costs at least one produce, one",
             "read of its job, and history writes by both the scan and the results function).",
             "**Reproduce**: `python -m bench --only ceilings,fullstack --runs 1` (`--fullstack-executions`,",
             "`--fullstack-threads`).", ""]
    ceiling = (f"; ceilings: raw writes {spread(writes, unit='/s')}, raw produce {spread(produce, unit='/s')} "
               f"(drain at {pct(median(paired_ratios(drain, produce)))} of produce)" if writes and produce else
               "; ceilings not measured in this run (add `ceilings` to `--only`)")
    lines += [f"Drain {spread(drain, unit='/s')}, end to end {spread([r['end_to_end_rate'] for r in runs], unit='/s')}"
              f" (issue #14's target: 2,000/s){ceiling}. Submitted over HTTP at "
              f"{spread([r['submit_rate'] for r in runs], unit='/s')}.", ""]
    lines += table(["run", "S (UTC)", "accepted / submitted", "published (duplicates)", "results (copies)",
                     "recorded SUCCESS", "last publish", "drain rate", "last result", "end-to-end rate",
                     "all recorded", "lateness first / p50 / p99 / last", "submit rate",
                     "CPU cores busy, S to last result"], [
        [str(i + 1), r["due"][11:19], f"{r['accepted']:,} / {r['requested']:,}",
         f"{r['published']:,} ({r['duplicates']})", f"{r['results']:,} ({r['result_messages'] - r['results']})",
         f"{r['recorded']:,}" + (" (timed out)" if r["timed_out"] else ""), f"{fmt(r['last_publish_s'], 2)} s",
         f"{fmt(r['drain_rate'])}/s", f"{fmt(r['last_result_s'], 2)} s", f"{fmt(r['end_to_end_rate'])}/s",
         f"{fmt(r['recorded_s'], 1)} s",
         " / ".join(fmt(r["lateness_ms"][k], 0) for k in ("min", "p50", "p99", "max")) + " ms",
         f"{fmt(r['submit_rate'])}/s",
         ", ".join(f"{label} {fmt(value, 2)}" for label, value in (
             ("machine", r["cpu"].get("machine_cores", math.nan)),
             ("bench process (the stack)", r["cpu"].get("stack_cores", math.nan)),
             *((("environments", sum(v for k, v in r["cpu"].items() if k.startswith("environment"))),)
               if any(k.startswith("environment") for k in r["cpu"]) else ()),
             ("Cassandra", r["cpu"].get("cassandra_cores", math.nan)),
             ("Kafka", r["cpu"].get("kafka_cores", math.nan))))]
        for i, r in enumerate(runs)])
    odd = [f"run {i + 1}: " + ", ".join(f"{k} {r[k]}" for k in ("unpublished", "jobs_with_several_executions",
                                                                 "foreign_messages", "skipped_minutes") if r[k])
           for i, r in enumerate(runs)
           if any(r[k] for k in ("unpublished", "jobs_with_several_executions", "foreign_messages", "skipped_minutes"))]
    late = [str(i + 1) for i, r in enumerate(runs) if not r["planned_lane"] and fs.get("lead_s") is None]
    if odd or late:
        lines += ["**Anomalies**: " + "; ".join(odd + ([f"runs {', '.join(late)}: submissions ended less than 90 s "
                                                          "before the minute (late lane)"] if late else [])) + ".", ""]
    if fs.get("threads_left"):
        lines += [f"Threads still alive after the stack stopped: {', '.join(fs['threads_left'])}.", ""]
    return lines


def fairness_section(bench: Bench) -> list[str]:
    fair = bench.results.get("fairness")
    if not fair or not fair.get("runs"):
        return []
    runs = fair["runs"]
    light, heavy = fair["tenants"]["light"], fair["tenants"]["heavy"]
    if fair.get("clock") == "skip":  # no real clock: counts only
        return ["## 12. Fairness between tenants: a light tenant beside a heavy tenant's burst", "",
                "Scanned on a clock that never waits (`fairness_clock=\"skip\"`): lateness and ranks mean nothing "
                "and are not reported. Published / seeded (duplicates), unloaded ; loaded: "
                + ", ".join(" ; ".join(f"{sum(r[k]['published'].values()):,} / {sum(r[k]['seeded'].values()):,} "
                                       f"({r[k]['duplicates']})" for k in ("unloaded", "loaded")) for r in runs)
                + ".", ""]

    def late(minute: dict[str, Any], tenant: str, keys: tuple[str, ...]) -> str:
        figures = minute["lateness_ms"][tenant]
        return " / ".join(fmt(figures[k], 0) for k in keys) + " ms"

    one_minute = ("" if fair.get("gap_s") is None else
                  f"**Short run** (`--fairness-gap`): the unloaded and loaded executions in one minute, the loaded "
                  f"ones {fmt(fair['gap_s'], 0)} s after the unloaded ones, which are due at a second of that minute, "
                  "not at its first instant.")
    lines = ["## 12. Fairness between tenants: a light tenant beside a heavy tenant's burst", "",
             f"**Workload** (per run): two consecutive real wall-clock minutes, {fair['segments']} segments, scanned",
             "as section 2's minutes are (the real clock, each minute's scans started 10 s ahead in",
             f"{fair['processes']} worker processes, one thread per segment). *Unloaded*: tenant B (`{light}`) alone, "
             f"{fair['light']:,} executions due at the minute's first instant. *Loaded*: B's {fair['light']:,} and "
             f"tenant A's (`{heavy}`) {fair['heavy']:,}, all due at that same instant. Every row is seeded into its",
             "minute's planned lane before the scans start, and the minutes hold no other row. **Measured**: each",
             "execution's CreateTime (its message, read back from the section's own topic once the scans ended)",
             "minus its due instant; and B's rank among all the loaded minute's executions by CreateTime (1: the",
             "first published; ties share the best rank), which shows where B's rows came out of A's burst whatever",
             "the machine's speed." + (f" With {fair['light']} executions, B's p99 is its slowest (nearest rank)."
                                       if fair["light"] < 100 else ""),
             f"**The rule** (issue #13's goal): B's loaded p99 within {fmt(fair['goal_ms'] / 1000, 0)} s of its "
             "unloaded p99.",
             f"Code measured: `{fair['code']}` (`{fair['path']}`; worker processes: "
             + ", ".join(f"`{c}`" for c in fair["worker_code"]) + ").",
             *([one_minute] if one_minute else []),
             "**Reproduce**: `python -m bench --only fairness --runs 1` (`--fairness-heavy`, `--fairness-light`,",
             "`--fairness-segments`).", ""]
    lines += table(["run", "minutes (UTC)", "B unloaded: p50 / p99 / max", "B loaded: p50 / p99 / max",
                     "B p99: loaded - unloaded", "goal met", "A: first / p50 / p99 / last",
                     "B's rank in the loaded minute: median / max", "published / seeded (duplicates)"], [
        [str(i + 1), f"{r['unloaded']['minute'][11:16]}, {r['loaded']['minute'][11:16]}",
         late(r["unloaded"], light, ("p50", "p99", "max")), late(r["loaded"], light, ("p50", "p99", "max")),
         f"{fmt(r['light_p99_delta_ms'], 0)} ms", "yes" if r["met"] else "**no**",
         late(r["loaded"], heavy, ("first", "p50", "p99", "max")),
         f"{fmt(r['loaded']['light_rank']['median'], 0)} / {fmt(r['loaded']['light_rank']['max'], 0)} of "
         f"{r['loaded']['light_rank']['of']:,}",
         " ; ".join(f"{sum(r[k]['published'].values()):,} / {sum(r[k]['seeded'].values()):,} "
                    f"({r[k]['duplicates']})" for k in ("unloaded", "loaded"))]
        for i, r in enumerate(runs)])
    deltas = [r["light_p99_delta_ms"] for r in runs]
    met = sum(1 for r in runs if r["met"])
    lines += [f"B's p99 loaded {spread([r['loaded']['lateness_ms'][light]['p99'] for r in runs], 0, ' ms')}, "
              f"unloaded {spread([r['unloaded']['lateness_ms'][light]['p99'] for r in runs], 0, ' ms')}: "
              f"difference {spread(deltas, 0, ' ms')}, the goal met in {met} of {len(runs)} run(s). A's burst "
              f"drained in {spread([r['loaded']['lateness_ms'][heavy]['max'] for r in runs], 0, ' ms')} (its last "
              f"message; its first came {spread([r['loaded']['lateness_ms'][heavy]['first'] for r in runs], 0, ' ms')}"
              " after the due second: a scan reads the jobs of a whole group of rows (`ScanRules.group_size`)"
              " and records them RUNNING before it sends any of them); B's median rank "
              f"{spread([r['loaded']['light_rank']['median'] for r in runs], 0)} of "
              f"{runs[0]['loaded']['light_rank']['of']:,} (a fair order puts all of B's rows near the front). "
              f"Seeding took {fmt(fair['seed_s'], 0)} s (not measured).", ""]
    odd = []
    for i, r in enumerate(runs):
        for kind in ("unloaded", "loaded"):
            m = r[kind]
            problems = [f"{k} {m[k]}" for k in ("unpublished", "duplicates", "foreign") if m[k]]
            scans = m["scans"]
            if scans["finished"] != scans["segments"]:
                problems.append(f"{scans['finished']}/{scans['segments']} scans finished")
            problems += [f"{k} {scans[k]}" for k in ("errors", "lost_lease") if scans[k]]
            problems += [f"crashed: {c[:120]}" for c in scans["crashed"]]
            if problems:
                odd.append(f"run {i + 1} {kind}: " + ", ".join(problems))
    if fair.get("other_minutes"):
        odd.append(f"{fair['other_minutes']} message(s) due in no minute of the section")
    if odd:
        lines += ["**Anomalies**: " + "; ".join(odd) + ".", ""]
    return lines


#: py-spy cannot see inside the driver's compiled (Cython) modules: their time shows as self time of the
#: last Python frame, here the benchmark's counting proxy. Named for what they are in the report.
_FRAME_NAMES = {
    "CountingSession.execute_async (instruments.py)":
        "Session.execute_async: the driver's compiled request path (bind, encode, send), via the counting proxy",
    "CountingSession.execute (instruments.py)": "Session.execute: the driver's compiled request path",
    "namedtuple (__init__.py)": "collections.namedtuple: the driver's default row factory makes a class per result",
    "<lambda> (<string>)": "namedtuple-generated code (row construction)",
}


def _frame(name: str) -> str:
    return _FRAME_NAMES.get(name, f"`{name}`")


def profile_section(bench: Bench) -> list[str]:
    prof = bench.results.get("profile")
    if not prof:
        return []
    if "error" in prof:
        return ["## Profile", "", prof["error"], ""]
    d = prof["drain"]
    lines = ["## Profile of the drain (the scan as it is now; the before profile is in Findings)", "",
             f"py-spy ({prof['samples']:,} on-CPU samples at 97 Hz of the {len(prof['files'])} worker processes) while",
             f"{d['executions']:,} executions drained at {fmt(d['rate'])}/s (sampling costs some speed). Raw collapsed",
             "stacks: `.local/bench/profile-*.txt` (open them in speedscope.app).", ""]
    lines += ["CPU by thread:", ""]
    lines += table(["thread", "share of samples"], [[k, pct(v)] for k, v in prof["roles"].items()])
    lines += ["Scan threads' CPU by the package of the innermost frame:", ""]
    lines += table(["package", "share of scan-thread samples"],
                    [[k, pct(v)] for k, v in prof["scan_thread_packages"].items()])
    lines += ["Inclusive share of all samples of the functions that matter:", ""]
    lines += table(["function", "inclusive"], [[f"`{k}`", pct(v)] for k, v in prof["key_inclusive"].items()])
    lines += ["Top self time (innermost frame):", ""]
    lines += table(["function", "self"], [[_frame(k), pct(v)] for k, v in list(prof["top_self"].items())[:15]])
    return lines
