"""A context value refused: ``ConfigError``, and pydantic's ``ValidationError`` said as one (stage, key, reason)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails


class ConfigError(ValueError):
    """A context value is missing, malformed or out of range."""


class Refusal(ValueError):
    """Raised by a rule that spans keys (a model validator): the key to name, which pydantic's location lacks."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key


def refused(exc: ValidationError, stage: str | None, *, prefix: str = "") -> ConfigError:
    """One ``ConfigError`` for every value ``exc`` refuses: ``stage <stage>: <key>: <reason>``, one per line."""
    lines = [_line(error, prefix) for error in exc.errors()]
    where = f"stage {stage}: " if stage else ""
    return ConfigError("\n".join(f"{where}{line}" for line in lines))


def _line(error: ErrorDetails, prefix: str) -> str:
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, Refusal):
        return f"{prefix}{cause.key}: {cause}"
    key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    return f"{prefix}{key}: {_reason(error)}"


def _reason(error: ErrorDetails) -> str:
    """The reason in plain words; a rule of ours (a value error) says it itself."""
    cause = error.get("ctx", {}).get("error")
    if error["type"] == "value_error" and cause is not None:
        return str(cause)
    message = error["msg"]
    return f"{message[0].lower()}{message[1:]}, got {error.get('input')!r}"
