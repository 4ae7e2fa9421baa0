"""The levers not taken (yet), priced by the same model: what each would save, one on top of the other.

First the runtime levers (redesigns that keep every guarantee and feature), then product choices (what a tenant
would keep less of). A lever here changes what an execution writes, reads or keeps (the measured inputs) or a
stage setting, so its price is the model's, not a guess. Each says what it would cost in design, guarantees or
features: the figures are what is left between the targets of issue #33 and the code as it is, and what it would
take.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from bench.cost.model import Load, monthly_lines, per_million, total

if TYPE_CHECKING:
    from bench.cost.inputs import MeasuredInputs
    from bench.cost.model import Capacity, StageConfig
    from bench.cost.prices import PriceTable


class Lever(BaseModel):
    """A change the model can price: new values of some inputs and of some stage settings."""

    model_config = ConfigDict(frozen=True)

    name: str
    inputs: dict[str, float] = {}
    stage: dict[str, Any] = {}
    #: Tables the stage's point-in-time recovery would no longer cover.
    pitr_without: tuple[str, ...] = ()
    #: What it takes, or why it is not taken.
    takes: str


LEVERS: tuple[Lever, ...] = (
    Lever(name="history written once, with its outcome", inputs={"history_rows_written": 1.0},
          takes="the RUNNING record, which sixteen readers ask today, replaced by a receipt in the result token, the "
                "watchdog row and a marker per scan flush, for executions of jobs with no policy that reads it; "
                "priced here as the ideal (the markers and their sweep give some of it back): "
                "docs/history-written-once.md"),
    Lever(name="no TTL deletes of history and schedule rows", inputs={"ttl_deletes": 0.0,
                                                                      "history_purge_lag_days": 0.5},
          takes="rows expired by dropping whole time-bucketed tables, a table a day: a dropped table costs no TTL "
                "delete, leaves storage at once instead of up to 10 days after its rows expire, and (with point-in-"
                "time recovery) stays restorable 35 days at no additional cost; tables named by their day, never "
                "reused (a new table of a dropped one's name ends its restore), made ahead by a scheduled function "
                "(Keyspaces DDL is asynchronous), IAM for CREATE and DROP at run time, every history reader walking "
                "tables by day (a job's newest records, an execution's record by its day), and schedule rows due "
                "beyond the ring kept in a table that expires by TTL"),
    Lever(name="history kept 7 days by default, not 30", inputs={"history_ttl_days": 7.0},
          takes="a product choice, not a design: the tenants' default `history_days` 7 (a tenant may keep more and "
                "pay for it); a one-time job's row goes with its history (domain.expiry), so it is held 8.5 days, "
                "not 31.5; the change log's 30 days kept. EventBridge Scheduler keeps no history at all"),
    Lever(name="no point-in-time recovery of the history", pitr_without=("task_history_v2",),
          takes="a product choice: the history is the only record of each execution, and an operator's mistake "
                "(a truncate, a bad migration) would lose it for good; jobs, calendars and the change log keep it"),
)


def _with(inputs: MeasuredInputs, values: dict[str, float]) -> MeasuredInputs:
    update = {name: getattr(inputs, name).model_copy(update={"value": value}) for name, value in values.items()}
    return inputs.model_copy(update=update)


def cumulative(config: StageConfig, inputs: MeasuredInputs, prices: PriceTable, executions_per_day: float,
               capacity: Capacity) -> list[tuple[str, float]]:
    """Per million at ``executions_per_day``: now, then with each lever of ``LEVERS`` added to the ones before."""
    stage = config.model_copy(update={"keyspaces_capacity": capacity})

    def price(stage: StageConfig, inputs: MeasuredInputs) -> float:
        lines = monthly_lines(stage, inputs, prices, Load(executions_per_day=executions_per_day, capacity=capacity))
        return per_million(total(lines), executions_per_day)

    rows = [("now", price(stage, inputs))]
    for lever in LEVERS:
        inputs = _with(inputs, lever.inputs)
        stage = stage.model_copy(update=lever.stage)
        if lever.pitr_without:  # the stage's point-in-time recovery, less those tables
            stage = stage.model_copy(update={"pitr_tables": tuple(
                t for t in stage.pitr_tables if t not in lever.pitr_without)})
        rows.append((lever.name, price(stage, inputs)))
    return rows
