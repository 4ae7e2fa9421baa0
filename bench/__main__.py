"""``python -m bench``: the benchmarks of the issue "make bench" (see docs/benchmarks.md).

Examples::

    python -m bench                          # everything, 3 runs each (about half an hour on 2 cores)
    python -m bench --only drain,ceilings    # some sections
    python -m bench --runs 1 --drain-executions 20000 --out /tmp/b.md --chart /tmp/b.png
    python -m bench --smoke                  # seconds: what tests/bench/test_bench_smoke.py runs
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from bench.context import ROOT, SECTIONS, Options


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def parse(argv: list[str]) -> tuple[Options, argparse.Namespace]:
    defaults = Options()
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, 1 run, output under .local/bench/smoke")
    p.add_argument("--only", default=",".join(defaults.sections), help=f"sections, from {','.join(SECTIONS)}")
    p.add_argument("--runs", type=int, default=defaults.runs, help="repetitions of each figure (>= 3 for the report)")
    p.add_argument("--processes", type=int, default=defaults.processes, help="worker processes (default: nproc)")
    p.add_argument("--drain-executions", type=int, default=defaults.drain_executions)
    p.add_argument("--drain-segments", type=int, default=defaults.drain_segments)
    p.add_argument("--scaling-segments", type=_ints, default=defaults.scaling_segments)
    p.add_argument("--scaling-executions", type=int, default=defaults.scaling_executions)
    p.add_argument("--lateness-executions", type=int, default=defaults.lateness_executions)
    p.add_argument("--submit-requests", type=int, default=defaults.submit_requests)
    p.add_argument("--submit-threads", type=int, default=defaults.submit_threads)
    p.add_argument("--submit-environments", type=int, default=defaults.submit_environments,
                   help="warm processes serving the API beside the bench's own server (0: that server alone)")
    p.add_argument("--memory-sizes", type=_ints, default=defaults.memory_sizes)
    p.add_argument("--ceiling-ops", type=int, default=defaults.ceiling_ops)
    p.add_argument("--combined-executions", type=int, default=defaults.combined_executions)
    p.add_argument("--profile-executions", type=int, default=defaults.profile_executions)
    p.add_argument("--variants", default=",".join(defaults.variants), help="what-if variants of the scan")
    p.add_argument("--variant-executions", type=int, default=defaults.variant_executions)
    p.add_argument("--writes-executions", type=int, default=defaults.writes_executions)
    p.add_argument("--writes-failures", type=float, default=defaults.writes_failures,
                   help="share of the writes section's executions that fail once (then retried)")
    p.add_argument("--short-jobs", type=int, default=defaults.short_jobs)
    p.add_argument("--short-periods", type=_ints, default=defaults.short_periods,
                   help="seconds between fires, a workload each (comma-separated)")
    p.add_argument("--idle-segments", type=int, default=defaults.idle_segments)
    p.add_argument("--idle-minutes", type=int, default=defaults.idle_minutes)
    p.add_argument("--fullstack-executions", type=int, default=defaults.fullstack_executions,
                   help="jobs submitted over HTTP per run of the full-stack section, all due at one second")
    p.add_argument("--fullstack-threads", type=int, default=defaults.fullstack_threads,
                   help="HTTP client threads submitting them")
    p.add_argument("--fullstack-environments", type=int, default=defaults.fullstack_environments,
                   help="warm environment processes running the scans and serving the API beside the stack's "
                        "own (0: the whole stack in one process)")
    p.add_argument("--fullstack-lead", type=float, default=defaults.fullstack_lead_s,
                   help="due this many seconds after the submissions end, in the late lane (default: a minute "
                        "that begins at least 100 s after them, in the planned lane)")
    p.add_argument("--fairness-heavy", type=int, default=defaults.fairness_heavy,
                   help="the heavy tenant's executions in the loaded minute, all due at one second")
    p.add_argument("--fairness-light", type=int, default=defaults.fairness_light,
                   help="the light tenant's executions, due at the same second (loaded and unloaded minutes)")
    p.add_argument("--fairness-segments", type=int, default=defaults.fairness_segments)
    p.add_argument("--fairness-gap", type=float, default=defaults.fairness_gap_s,
                   help="the unloaded and loaded executions in one minute, this many seconds apart (default: two "
                        "consecutive minutes, each due at its first instant)")
    p.add_argument("--fairness-margin", type=float, default=defaults.fairness_margin_s,
                   help="seconds before the first scans start, beyond the seeding's estimated time")
    p.add_argument("--deliveries-executions", type=int, default=defaults.deliveries_executions,
                   help="jobs with an HTTPS target due at random seconds of a minute (latency), and as many on Kafka")
    p.add_argument("--deliveries-burst", type=int, default=defaults.deliveries_burst,
                   help="jobs with an HTTPS target due at one instant (throughput), as many on Kafka, and the "
                        "ceiling's requests")
    p.add_argument("--out", type=Path, default=defaults.out_md, help="markdown report")
    p.add_argument("--chart", type=Path, default=defaults.out_png, help="PNG chart")
    p.add_argument("--keep", action="store_true", help="keep the keyspace, table and topics (debugging)")
    p.add_argument("--from-json", metavar="PATH", nargs="+",
                   help="only write the report and chart from saved runs (several: merged, e.g. runs of --only)")
    p.add_argument("--drop", metavar="RUN_ID", help="only remove the leftovers of a killed run")
    args = p.parse_args(argv)
    if args.smoke:
        return Options.smoke(ROOT / ".local" / "bench" / "smoke"), args
    sections = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    return Options(
        runs=args.runs, processes=args.processes, sections=tuple(s for s in SECTIONS if s in sections),
        drain_executions=args.drain_executions, drain_segments=args.drain_segments,
        scaling_segments=args.scaling_segments, scaling_executions=args.scaling_executions,
        lateness_executions=args.lateness_executions, submit_requests=args.submit_requests,
        submit_threads=args.submit_threads, submit_environments=args.submit_environments,
        memory_sizes=args.memory_sizes, ceiling_ops=args.ceiling_ops,
        combined_executions=args.combined_executions, profile_executions=args.profile_executions,
        variants=tuple(v.strip() for v in args.variants.split(",") if v.strip()),
        variant_executions=args.variant_executions,
        writes_executions=args.writes_executions, writes_failures=args.writes_failures,
        short_jobs=args.short_jobs, short_periods=args.short_periods, idle_segments=args.idle_segments,
        idle_minutes=args.idle_minutes, fullstack_executions=args.fullstack_executions,
        fullstack_threads=args.fullstack_threads, fullstack_lead_s=args.fullstack_lead,
        fullstack_environments=args.fullstack_environments,
        fairness_heavy=args.fairness_heavy, fairness_light=args.fairness_light,
        fairness_segments=args.fairness_segments, fairness_gap_s=args.fairness_gap,
        fairness_margin_s=args.fairness_margin,
        deliveries_executions=args.deliveries_executions, deliveries_burst=args.deliveries_burst,
        out_md=args.out, out_png=args.chart, keep=args.keep,
    ), args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.WARNING, format="bench: %(name)s: %(message)s")
    for noisy in ("cassandra", "kafka"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    options, args = parse(argv)
    from bench.runner import drop, render, run  # after parsing: `--help` need not load every section

    if args.drop:
        drop(args.drop)
        return 0
    if args.from_json:
        render(args.from_json, options)
        return 0
    run(options, command=" ".join(["python -m bench", *map(shlex.quote, argv)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
