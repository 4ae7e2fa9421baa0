"""A stage's entry in ``stages``: where it deploys (account, region), whether it is protected, and the context keys
it sets for itself."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from infra.config.context import CONTEXT_DEFAULTS, parse
from infra.config.errors import ConfigError, refused
from infra.config.types import matching

#: Stages that are protected whatever ``stages`` says.
PROTECTED_STAGES = frozenset({"prod"})
STAGE = r"^[a-z][a-z0-9-]{0,15}$"


class Placement(BaseModel):
    """Where a stage deploys: its account and region (None: where the credentials point), and its protection
    (termination protection on the stack, deletion protection on the resources that offer it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    account: Annotated[str, matching(r"^[0-9]{12}$", "12 digits as a string")] | None = None
    region: Annotated[str, matching(r"^[a-z]{2}(-[a-z]+)+-[0-9]$", "a region such as eu-west-1")] | None = None
    protected: bool | None = Field(None, validate_default=True)

    @field_validator("protected", mode="before")
    @classmethod
    def _protected(cls, value: Any, info: ValidationInfo) -> bool:
        """A protected stage (prod always is) names its account and region, and keeps its data."""
        context: dict[str, Any] = info.context or {}
        stage, retain_data = context["stage"], context["retain_data"]
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        if stage in PROTECTED_STAGES:
            if value is False:
                raise ValueError(f"stage {stage} is always protected")
            value = True
        if value:
            if info.data.get("account") is None or info.data.get("region") is None:
                raise ValueError(f"stage {stage} is protected: set stages.{stage}.account and stages.{stage}.region "
                                 f"in cdk.json, so that it deploys to that account and region only")
            if retain_data is not True:
                raise ValueError(f"stage {stage} is protected: its data is kept (retain_data must be true)")
        return bool(value)


def stage_values(raw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The stage and the values of its keys: ``raw`` (every context key) with ``stages[stage]``'s overrides
    applied, ``stages`` itself replaced by the stage's placement.

    A key both overridden there and given another value on the command line (or at the top of ``cdk.json``) is
    refused rather than silently resolved: which one a deploy used would depend on knowing the precedence, and
    ``cdk diff`` would show the surprise only if someone read it.
    """
    stage = raw["stage"]
    if not isinstance(stage, str) or not re.match(STAGE, stage):
        raise ConfigError(f"stage {stage!r}: 1-16 lowercase letters, digits or hyphens, starting with a letter")
    entry = _entry(raw["stages"], stage)
    values = {key: value for key, value in raw.items() if key != "stages"}
    for key, value in entry.items():
        if key in Placement.model_fields:
            continue
        value = parse(value)
        if raw[key] != CONTEXT_DEFAULTS[key] and raw[key] != value:
            raise ConfigError(f"{key}: stages.{stage} sets {value!r}, the context {raw[key]!r}; change it in one "
                              f"place (stages.{stage} in cdk.json for this stage)")
        values[key] = value
    placed = {key: entry[key] for key in Placement.model_fields if key in entry}
    try:
        placement = Placement.model_validate(placed, context={"stage": stage, "retain_data": values["retain_data"]})
    except ValidationError as exc:
        raise refused(exc, None, prefix=f"stages.{stage}.") from None
    return stage, values | placement.model_dump()


def _entry(stages: Any, stage: str) -> dict[str, Any]:
    """``stages[stage]`` (empty when not there), once ``stages`` and its keys are known good."""
    if not isinstance(stages, dict) or not all(isinstance(v, dict) for v in stages.values()):
        raise ConfigError(f"stages: expected an object of stage -> settings, got {stages!r}")
    entry: dict[str, Any] = stages.get(stage, {})
    unknown = set(entry) - set(Placement.model_fields) - (set(CONTEXT_DEFAULTS) - {"stage", "stages"})
    if unknown:
        raise ConfigError(f"stages.{stage}: unknown keys {sorted(unknown)} (account, region, protected, or a "
                          f"context key)")
    return entry
