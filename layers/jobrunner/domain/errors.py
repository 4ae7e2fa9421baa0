"""Domain errors. The API maps each to one HTTP status in one place (``api/errors.py``)."""

from __future__ import annotations


class DomainError(Exception):
    """Base class of every error the services raise on purpose."""


class InvalidField(DomainError):
    """A request field is wrong; ``field`` is its dotted path, ``reason`` says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class InvalidFields(DomainError):
    """Several request fields are wrong at once (the jobs of a batch); each of ``errors`` names its own."""

    def __init__(self, errors: list[InvalidField]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = errors


class Forbidden(DomainError):
    """The caller may not do this (a topic not granted to its tenant, an operator view); ``field`` names
    what was refused, ``reason`` says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class LimitReached(DomainError):
    """A tenant's limit (``limit`` names it) refuses the request for now; ``retry_after_s`` says when it
    may succeed again."""

    def __init__(self, limit: str, reason: str, retry_after_s: int) -> None:
        super().__init__(f"{limit}: {reason}")
        self.limit = limit
        self.reason = reason
        self.retry_after_s = retry_after_s


class NotFound(DomainError):
    """No such thing for this tenant (also raised for another tenant's, so names do not leak); the message
    names what was looked for."""


class JobNotFound(NotFound):
    """No such job for this tenant (also raised for another tenant's job, so ids do not leak)."""


class Conflict(DomainError):
    """The request contradicts the job's current state (e.g. resuming a cancelled job)."""


class Unavailable(DomainError):
    """A backing service (database, broker) cannot be reached; the caller may retry."""
