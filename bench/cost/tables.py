"""The model's tables, as plain rows: printed by the CLI (rich) and written into docs/scaling.md (markdown).

docs/scaling.md holds each table between ``<!-- cost:begin NAME -->`` and ``<!-- cost:end -->``;
``render_docs`` replaces what is between them, and a test fails when the file differs from it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from bench.cost.model import (
    DAYS,
    Load,
    StageConfig,
    at_rest,
    capacity_checks,
    eventbridge_per_million,
    kafka_options,
    monthly_lines,
    per_million,
    sized_for,
    total,
)
from bench.cost.quotas import QUOTAS, quota_checks
from bench.cost.whatif import LEVERS, cumulative

if TYPE_CHECKING:
    from collections.abc import Mapping

    from bench.cost.inputs import MeasuredInputs
    from bench.cost.model import Capacity, Line
    from bench.cost.prices import PriceTable

#: The loads of the per-million table: executions a day, with their column label.
LOADS: tuple[tuple[float, str], ...] = ((1e6, "1 M/day"), (50e6, "50 M/day"), (1e9, "1 B/day"))
CAPACITIES: tuple[Capacity, ...] = ("on-demand", "provisioned")


class Table(BaseModel):
    """A table of text cells; the first row is the header."""

    model_config = ConfigDict(frozen=True)

    name: str
    title: str
    header: list[str]
    rows: list[list[str]]
    bold_from: int | None = None  # rows from this index on are totals

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        for index, row in enumerate(self.rows):
            if self.bold_from is not None and index >= self.bold_from:
                row = [f"**{cell}**" if cell else "" for cell in row]
            lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines)


def _money(usd: float) -> str:
    if usd == 0:
        return "0"
    if abs(usd) >= 100:
        return f"${usd:,.0f}"
    if abs(usd) >= 1:
        return f"${usd:,.2f}"
    if abs(usd) >= 0.01:
        return f"${usd:.2f}"
    return "< $0.01"


def _key(line: Line) -> str:
    return f"{line.service}: {line.item}"


def per_million_table(config: StageConfig, inputs: MeasuredInputs, prices: PriceTable) -> Table:
    """Dollars per million executions, line by line, at each load and Keyspaces capacity mode (fixed costs
    included), one-time jobs submitted in ``POST /jobs/batch``; then the totals with ``POST /jobs``."""
    columns: list[tuple[float, Capacity, dict[str, float], float, float]] = []
    order: list[str] = []
    for executions, _ in LOADS:
        sized = sized_for(config, executions)
        for capacity in CAPACITIES:
            lines = monthly_lines(sized, inputs, prices, Load(executions_per_day=executions, capacity=capacity))
            single = monthly_lines(sized, inputs, prices,
                                   Load(executions_per_day=executions, capacity=capacity, submit="single"))
            by_key: dict[str, float] = {}
            for line in lines:
                by_key[_key(line)] = by_key.get(_key(line), 0.0) + line.usd
                if _key(line) not in order:
                    order.append(_key(line))
            columns.append((executions, capacity, by_key, total(lines), total(single)))
    header = ["line", *(f"{label} {capacity}" for _, label in LOADS for capacity in CAPACITIES)]
    rows = [[key, *(_money(per_million(col[2].get(key, 0.0), col[0])) for col in columns)] for key in order]
    eventbridge = eventbridge_per_million(prices)
    totals = [
        ["total, one-time jobs in POST /jobs/batch", *(_money(per_million(col[3], col[0])) for col in columns)],
        ["total, one-time jobs one POST /jobs each", *(_money(per_million(col[4], col[0])) for col in columns)],
        ["EventBridge Scheduler (nothing at rest)", *(_money(eventbridge) for _ in columns)],
        ["x EventBridge Scheduler (batch)", *(f"{per_million(col[3], col[0]) / eventbridge:.1f}x" for col in columns)],
    ]
    sizes = ", ".join(f"{label}: {sized_for(config, e).segments} segments, {sized_for(config, e).kafka_partitions} "
                      "partitions" for e, label in LOADS)
    return Table(name="per-million", title=f"Dollars per million executions ({config.stage}'s other settings, sized "
                 f"for each load: {sizes}; {config.scan_memory_mb} MB scans)",
                 header=header, rows=rows + totals, bold_from=len(rows))


#: The configuration before issue #33's deployment levers: dev's (16 segments, 3 partitions, a provisioned poller,
#: PITR on every table, every function traced, every result logged, MSK Serverless, endpoints in two zones).
BEFORE = StageConfig()


def at_rest_stages(stages: Mapping[str, StageConfig]) -> list[tuple[str, StageConfig]]:
    """The at-rest table's columns: the configuration before the levers, then each stage of cdk.json."""
    return [("before the levers", BEFORE), *((f"{name} ({stage.segments} segments)", stage)
                                             for name, stage in stages.items())]


def at_rest_table(stages: Mapping[str, StageConfig], inputs: MeasuredInputs, prices: PriceTable) -> Table:
    """Dollars a month with nothing to do, line by line, before the levers and for each stage of cdk.json."""
    columns = at_rest_stages(stages)
    bills = [{_key(line): line.usd for line in at_rest(stage, inputs, prices, stage.keyspaces_capacity)}
             for _, stage in columns]
    order: list[str] = []
    for bill in bills:
        order += [key for key in bill if key not in order]
    rows = [[key, *(_money(bill.get(key, 0.0)) for bill in bills)] for key in order]
    rows.append([f"total a month ({DAYS} days)", *(_money(sum(bill.values())) for bill in bills)])
    return Table(name="at-rest", title="Dollars a month with nothing to do", header=["line", *(n for n, _ in columns)],
                 rows=rows, bold_from=len(rows) - 1)


def capacity_table(config: StageConfig, inputs: MeasuredInputs) -> Table:
    rows = []
    for executions, label in LOADS:
        for check in capacity_checks(config, inputs, executions):
            rows.append([label, check.limit, f"{check.capacity_per_second:,.0f}/s",
                         f"{check.needed_per_second:,.0f}/s", check.advice])
    return Table(name="capacity", title="Limits a busy minute meets (all of a minute due at its first second, "
                 "out within 15 s)", header=["load", "limit", "capacity", "a busy minute needs", "to size"], rows=rows)


def quotas_table(config: StageConfig, inputs: MeasuredInputs) -> Table:
    """What 50 M and 1 B a day ask of each quota on the path (``bench.cost.quotas``), the stage sized for each."""
    rows = []
    for executions, label in LOADS[1:]:
        for check in quota_checks(config, inputs, executions):
            quota = QUOTAS[check.quota]
            headroom = f"{check.headroom:,.1f}x" if check.headroom >= 0.1 else f"{check.headroom:.2f}x"
            rows.append([label, f"{quota.service}: {quota.name}", f"{check.limit:,.0f} {quota.unit}",
                         f"{check.needed:,.0f}", headroom, check.advice])
    return Table(name="quotas", title=f"Quotas on the path, stage {config.stage} sized for each load (headroom "
                 "below 1x: the load needs more than the default)",
                 header=["load", "quota", "limit", "needs", "headroom", "what it is, what reaches it"], rows=rows)


def levers_table(stage: StageConfig, inputs: MeasuredInputs, prices: PriceTable) -> Table:
    """The runtime levers not taken (``bench.cost.whatif``), each added to the ones above, at 50 M a day."""
    provisioned = cumulative(stage, inputs, prices, 50e6, "provisioned")
    on_demand = cumulative(stage, inputs, prices, 50e6, "on-demand")
    takes = {lever.name: lever.takes for lever in LEVERS}
    rows = [[name, _money(p), _money(o), takes.get(name, "the code as it is")]
            for (name, p), (_, o) in zip(provisioned, on_demand, strict=True)]
    return Table(name="levers", title=f"Per million at 50 M/day, stage {stage.stage}, with the levers not taken, "
                 "each on top of those above", header=["lever", "provisioned", "on-demand", "what it takes"],
                 rows=rows)


def quota_sources_table() -> Table:
    rows = [[f"{q.service}: {q.name}", f"{q.default:,.0f} {q.unit}", "yes" if q.adjustable else "no", q.source,
             q.checked.isoformat()] for q in QUOTAS.values()]
    return Table(name="quota-sources", title="Each quota's default and where it is written",
                 header=["quota", "default", "raised on request", "source", "read on"], rows=rows)


def _unit_price(usd: float) -> str:
    """A price per request as dollars per million (how AWS quotes them), the others as they are."""
    return f"${usd * 1e6:.4g} per million" if usd < 1e-4 else f"${usd:.10g}"


def prices_table(prices: PriceTable) -> Table:
    rows = [[name, _unit_price(price.value), price.unit, price.region, price.source, price.checked]
            for name, price in prices]
    return Table(name="prices", title="Unit prices (bench/cost/prices.py)",
                 header=["price", "USD", "per", "region", "source", "checked"], rows=rows)


def lines_table(lines: list[Line], executions_per_day: float) -> Table:
    """One load's bill with how each line is counted (the CLI's detail view)."""
    rows = [[line.service, line.item, _money(line.usd),
             _money(per_million(line.usd, executions_per_day)) if executions_per_day else "",
             "yes" if line.at_rest else "", line.how] for line in lines]
    rows.append(["total", "", _money(total(lines)),
                 _money(per_million(total(lines), executions_per_day)) if executions_per_day else "", "", ""])
    return Table(name="lines", title=f"{executions_per_day:,.0f} executions a day",
                 header=["service", "line", "a month", "per million", "at rest", "how"], rows=rows,
                 bold_from=len(rows) - 1)


def kafka_table(config: StageConfig, inputs: MeasuredInputs, prices: PriceTable) -> Table:
    """The Kafka choice by cost at each load: MSK Serverless against the fewest provisioned brokers that carry it."""
    rows = []
    for executions, label in (((0.0, "at rest"), *LOADS)):
        for production in (False, True):
            options = kafka_options(sized_for(config, max(executions, 1.0)), inputs, prices, executions,
                                    production=production)
            (_, serverless), (brokers, provisioned) = options["serverless"], options["provisioned"]
            rows.append([label, "production (no t3)" if production else "any", _money(serverless),
                         f"{_money(provisioned)} ({brokers})",
                         "provisioned" if provisioned < serverless else "MSK Serverless"])
    return Table(name="kafka", title="Kafka a month by load (cluster, partitions, data)",
                 header=["load", "brokers", "MSK Serverless", "provisioned brokers", "cheaper"], rows=rows)


def _month(stage: StageConfig, inputs: MeasuredInputs, prices: PriceTable, executions: float,
           capacity: Capacity) -> float:
    return per_million(total(monthly_lines(stage, inputs, prices, Load(executions_per_day=executions,
                                                                       capacity=capacity))), executions)


def targets_table(stages: Mapping[str, StageConfig], inputs: MeasuredInputs, prices: PriceTable) -> Table:
    """Issue #33's targets: before the levers, and now (the small tier at 1 M a day, prod at 50 M a day)."""
    small, prod = stages["small"], stages["prod"]

    def rest(stage: StageConfig) -> float:
        return total(at_rest(stage, inputs, prices, stage.keyspaces_capacity))

    rows = [
        ["per million at 50 M/day, provisioned capacity", _money(_month(BEFORE, inputs, prices, 50e6, "provisioned")),
         _money(_month(prod, inputs, prices, 50e6, "provisioned")), "≤ $1.50"],
        ["per million at 50 M/day, on-demand", _money(_month(BEFORE, inputs, prices, 50e6, "on-demand")),
         _money(_month(prod.model_copy(update={"keyspaces_capacity": "on-demand"}), inputs, prices, 50e6,
                       "on-demand")), "≤ $2.50"],
        ["per million at 1 M/day (small tier, on-demand)", _money(_month(BEFORE, inputs, prices, 1e6, "on-demand")),
         _money(_month(small, inputs, prices, 1e6, "on-demand")), "≤ $10"],
        ["a month at zero load, small tier", _money(rest(BEFORE)), _money(rest(small)), "≤ $150"],
        ["a month at zero load, prod", _money(rest(BEFORE)), _money(rest(prod)), "≤ $400"],
    ]
    return Table(name="targets", title="Issue #33's targets, before the deployment levers and now",
                 header=["figure", "before the levers", "now", "target"], rows=rows)


#: The loads of the deliveries table: deliveries a day (every execution delivered to a target).
DELIVERY_LOADS: tuple[tuple[float, str], ...] = ((1e6, "1 M/day"), (50e6, "50 M/day"))
#: The lines of the results path a delivery takes like a worker's execution (its result), shown beside what
#: targets add.
SHARED_WITH_A_WORKER = {"Lambda: results function": "its result",
                        "MSK Serverless: data in and out": "its message and result"}


def with_targets(config: StageConfig) -> StageConfig:
    """``config`` allowing HTTPS targets: the delivery function, its topic and (one, or as the stage has) NAT
    gateway."""
    return config.model_copy(update={"targets": True, "nat_gateways": max(config.nat_gateways, 1),
                                     "topics": config.topics + (0 if config.targets else 1)})


def deliveries_table(config: StageConfig, inputs: MeasuredInputs, prices: PriceTable) -> Table:
    """What a stage with HTTPS targets pays for its deliveries: per million deliveries at each load (the at-rest
    lines' share included) and a month with nothing to do, line by line, as the difference between the stage with
    targets and without; then the results path a delivery shares with a worker's execution, and the totals."""
    plain = config.model_copy(update={"targets": False, "nat_gateways": 0,
                                      "topics": config.topics - (1 if config.targets else 0)})
    hooks = with_targets(plain)
    columns: list[tuple[float, dict[str, float], dict[str, float]]] = []
    for deliveries, _ in DELIVERY_LOADS:
        load = Load(executions_per_day=deliveries)
        bills = [{_key(line): line.usd for line in monthly_lines(sized_for(stage, deliveries), inputs, prices, load)}
                 for stage in (hooks, plain)]
        columns.append((deliveries, bills[0], bills[1]))
    rest_with = {_key(line): line.usd for line in at_rest(hooks, inputs, prices, hooks.keyspaces_capacity)}
    rest_without = {_key(line): line.usd for line in at_rest(plain, inputs, prices, plain.keyspaces_capacity)}
    added = [key for key in columns[0][1]
             if any(abs(with_.get(key, 0.0) - without.get(key, 0.0)) > 1e-9 for _, with_, without in columns)]
    rows = [[key, *(_money(per_million(with_.get(key, 0.0) - without.get(key, 0.0), n))
                    for n, with_, without in columns),
             _money(rest_with.get(key, 0.0) - rest_without.get(key, 0.0))] for key in added]
    rows += [[f"{key} ({what}, as a worker's)", *(_money(per_million(with_.get(key, 0.0), n))
                                                  for n, with_, _ in columns), ""]
             for key, what in SHARED_WITH_A_WORKER.items() if key in columns[0][1]]
    totals = [
        ["what targets add", *(_money(per_million(total_of(with_) - total_of(without), n))
                               for n, with_, without in columns),
         _money(total_of(rest_with) - total_of(rest_without))],
        ["a delivered execution, all in (the stage's whole bill)",
         *(_money(per_million(total_of(with_), n)) for n, with_, _ in columns), _money(total_of(rest_with))],
    ]
    return Table(name="deliveries", title=f"Dollars per million deliveries (every execution delivered to an HTTPS "
                 f"target), {config.stage} sized for each load, on-demand; and a month with nothing to do",
                 header=["line", *(f"per million, {label}" for _, label in DELIVERY_LOADS), "a month at rest"],
                 rows=rows + totals, bold_from=len(rows))


def total_of(bill: Mapping[str, float]) -> float:
    return sum(bill.values())


def doc_tables(config: StageConfig, inputs: MeasuredInputs, prices: PriceTable,
               stages: Mapping[str, StageConfig]) -> list[Table]:
    return [prices_table(prices), per_million_table(config, inputs, prices), capacity_table(config, inputs),
            at_rest_table(stages, inputs, prices), kafka_table(config, inputs, prices),
            targets_table(stages, inputs, prices), quotas_table(stages.get("prod", config), inputs),
            quota_sources_table(), levers_table(stages.get("prod", config), inputs, prices),
            deliveries_table(config, inputs, prices)]


_BLOCK = re.compile(r"(<!-- cost:begin (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- cost:end -->)", re.DOTALL)


def render_docs(text: str, tables: list[Table]) -> str:
    """``text`` with each marked block replaced by its table; a block naming no table is an error."""
    by_name = {table.name: table for table in tables}

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in by_name:
            raise KeyError(f"docs: no cost table named {name!r}")
        return f"{match.group(1)}{by_name[name].markdown()}\n{match.group(4)}"

    return _BLOCK.sub(replace, text)


def blocks_in(text: str) -> list[str]:
    return [match.group("name") for match in _BLOCK.finditer(text)]
