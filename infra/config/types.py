"""Field types of the context's options, each with the reason it gives for a value it refuses.

Values come from JSON (``cdk.json``, or ``-c`` strings read as JSON), so a number is an ``int`` and a flag a
``bool``: a string where a number belongs, or ``true`` where a count belongs, is refused rather than converted.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator

if TYPE_CHECKING:
    from collections.abc import Callable


def a_whole(value: object, low: int, high: int) -> int:
    """``value`` if it is an integer in [low, high] (``true`` is no integer here)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"expected an integer in [{low}, {high}], got {value!r}")
    return value


def whole(low: int, high: int) -> BeforeValidator:
    """An integer in [low, high]: ``Annotated[int, whole(1, 10)]``."""
    return BeforeValidator(lambda value: a_whole(value, low, high))


def share() -> BeforeValidator:
    """A share in [0, 1] (an integer or a decimal; ``true`` is no share here): ``Annotated[float, share()]``."""
    def check(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"expected a share in [0, 1], got {value!r}")
        return float(value)
    return BeforeValidator(check)


def _flag(value: object) -> object:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


Flag = Annotated[bool, BeforeValidator(_flag)]


def one_of(*choices: str) -> BeforeValidator:
    """One of ``choices``: ``Annotated[str, one_of("a", "b")]``."""
    def check(value: object) -> object:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return value
    return BeforeValidator(check)


def a_match(value: object, pattern: str, expected: str) -> str:
    """``value`` if it is a string matching ``pattern`` (``expected`` says what that is in words)."""
    if not isinstance(value, str) or not re.match(pattern, value):
        raise ValueError(f"expected {expected}, got {value!r}")
    return value


def matching(pattern: str, expected: str) -> BeforeValidator:
    """A string matching ``pattern``: ``Annotated[str, matching(r"^[a-z]+$", "lowercase letters")]``."""
    return BeforeValidator(lambda value: a_match(value, pattern, expected))


def _text(value: object) -> object:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


Text = Annotated[str, BeforeValidator(_text)]


def _blank_is_none(value: object) -> object:
    return None if value == "" else value


#: A string, or null; "" is null.
OptionalText = Annotated[str | None, BeforeValidator(_blank_is_none)]


def names(of: str, *, accepts: Callable[[str], bool] = bool) -> BeforeValidator:
    """A list of names (or a comma-separated string), in order, repeats dropped, each one ``accepts``:
    ``Annotated[tuple[str, ...], names("consumer group names")]``."""
    def check(value: object) -> object:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v and accepts(v) for v in value):
            raise ValueError(f"expected a list of {of}, got {value!r}")
        return tuple(dict.fromkeys(value))
    return BeforeValidator(check)


def an_object(value: object, known: tuple[str, ...], example: str) -> dict[str, Any]:
    """``value`` as an object of the ``known`` keys only (``example`` shows one)."""
    if not isinstance(value, dict):
        raise ValueError(f"expected null or an object such as {example}, got {value!r}")
    unknown = set(value) - set(known)
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} (known: {', '.join(known)})")
    return value
