"""Profile of a drain: py-spy samples every worker process while its scans drain a minute.

py-spy writes collapsed stacks (``--format raw``; speedscope and flamegraph.pl read them) to
``.local/bench/``; this module sums them up for the report: where the workers' CPU goes by thread
role, by leaf package and by function (self and inclusive).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.drain import drain_once

if TYPE_CHECKING:
    from bench.context import Bench

RATE_HZ = 97
_FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^()]*?)(?::\d+)?\)$")

#: Functions whose inclusive time the report always lists (matched on "Class.method (file)").
KEY_FUNCTIONS = (
    "Publishing.publish", "Completer.complete", "Completer._completion", "DueRows.take", "DueRows._advance_head",
    "CassandraJobStore.get_many", "CassandraJobStore.start", "CassandraJobStore.complete",
    "CassandraJobStore.scheduled", "KafkaPublisher.publish", "job_from_row", "scheduled_from_row",
    "execution_message", "plan_execution", "record_values", "scheduled_values", "execute_concurrent",
    "Session.execute_async", "BatchStatement.add", "PreparedStatement.bind", "KafkaProducer.send",
    "KafkaProducer.flush", "encode", "utc", "segment_of", "execution_id_for",
)


def py_spy() -> str | None:
    return shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")


def _role(stack: list[str]) -> str:
    text = ";".join(stack)
    if "_scan_one" in text:
        return "scan threads"
    if "cassandra/io/" in text or "libevreactor" in text:
        return "Cassandra driver I/O thread"
    if "kafka/" in text and ("sender" in text or "selector" in text or "net/" in text):
        return "Kafka producer I/O thread"
    return "other threads"


def _package(frame: str) -> str:
    match = _FRAME.match(frame)
    path = match.group("file") if match else frame
    parts = Path(path).parts
    for anchor in ("jobrunner", "cassandra", "kafka", "botocore", "boto3", "urllib3", "bench"):
        if anchor in parts:
            index = parts.index(anchor)
            if anchor == "jobrunner" and len(parts) > index + 2:
                return "/".join(parts[index:index + 2])
            return anchor
    return "stdlib: " + (parts[-2] if len(parts) > 1 and parts[-2] not in ("lib", "python3.11") else parts[-1])


def _name(frame: str) -> str:
    match = _FRAME.match(frame)
    if not match:
        return frame
    return f"{match.group('func')} ({Path(match.group('file')).name})"


def summarise(files: list[Path]) -> dict[str, Any]:
    roles: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    scan_leaf_packages: Counter[str] = Counter()
    total = 0
    for path in files:
        for line in path.read_text().splitlines():
            stack_text, _, count_text = line.rpartition(" ")
            if not stack_text or not count_text.isdigit():
                continue
            count = int(count_text)
            stack = stack_text.split(";")
            total += count
            role = _role(stack)
            roles[role] += count
            packages[_package(stack[-1])] += count
            if role == "scan threads":
                scan_leaf_packages[_package(stack[-1])] += count
            leaf[_name(stack[-1])] += count
            for name in {_name(frame) for frame in stack}:
                inclusive[name] += count

    def share(counter: Counter[str]) -> dict[str, float]:
        return {k: v / total for k, v in counter.most_common()} if total else {}

    key = {name: count / total for name, count in inclusive.items()
           if total and any(name.startswith(f + " ") for f in KEY_FUNCTIONS)}
    return {
        "samples": total, "roles": share(roles), "packages": dict(list(share(packages).items())[:12]),
        "scan_thread_packages": ({k: v / max(roles["scan threads"], 1) for k, v in scan_leaf_packages.most_common(10)}),
        "top_self": dict(list(share(leaf).items())[:20]),
        "key_inclusive": dict(sorted(key.items(), key=lambda kv: -kv[1])),
    }


def run_profile(bench: Bench) -> None:
    o = bench.options
    spy = py_spy()
    if spy is None:
        bench.results["profile"] = {"error": "py-spy is not installed (pip install py-spy)"}
        return
    o.work_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    files = [o.work_dir / f"profile-{stamp}-worker{i}.txt" for i in range(len(bench.pool))]
    recorders: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        for pid, path in zip(bench.pool.pids, files, strict=True):
            recorders.append(subprocess.Popen(
                [spy, "record", "--pid", str(pid), "--rate", str(RATE_HZ), "--format", "raw", "--function",
                 "--nonblocking", "--output", str(path)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        time.sleep(1.0)  # py-spy attaches

    try:
        result = drain_once(bench, o.profile_executions, o.drain_segments, on_start=start)
    finally:
        for recorder in recorders:  # our own children: stop sampling, let py-spy write its file
            recorder.send_signal(signal.SIGINT)
        for recorder in recorders:
            try:
                recorder.wait(timeout=60)
            except subprocess.TimeoutExpired:
                recorder.kill()
    present = [f for f in files if f.exists()]
    bench.results["profile"] = {"drain": result, "files": [str(f) for f in present], **summarise(present)}
    print(f"  profiled drain: {result['rate']:.0f}/s under py-spy; {bench.results['profile']['samples']} samples",
          flush=True)
