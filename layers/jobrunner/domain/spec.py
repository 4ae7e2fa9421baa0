"""A job's spec: every option its user controls, declared once, with the rules each keeps.

A ``Job`` (``domain.jobs``) is its identity, its spec, its lifecycle and its run state. The spec is what a
submit asks for (its ``digest`` tells a retried submission from another with the same idempotency key), what a
PATCH changes (``SpecChange``: the fields the request named) and what an answer shows. The API's models map to
and from it, and the store's codec writes and reads it; ``tests/unit/jobrunner/domain/test_spec.py`` fails when
one of them leaves a field out.

``JobSpec.checked`` holds the rules a spec keeps on its own (bounds, tags, catch-up, retries). The rules that
need the tenant (its topics, its payload limit, its calendars) are the services' (``services.jobs.checks``); a
schedule's shape is its parser's (``domain.schedules.parsing``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass, replace
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.policies import CatchUp, Overlap, check_catch_up
from jobrunner.domain.tags import parse_tags

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jobrunner.domain.schedules import Schedule
    from jobrunner.domain.targets.model import Target

#: The widest jitter window a job may have.
MAX_JITTER_S = 3600
#: The longest an execution may go unreported before it fails (a job's ``timeout_s``).
MAX_TIMEOUT_S = 24 * 3600
#: The most retries after the first attempt a job may ask for.
MAX_RETRIES = 20
#: The longest backoff delay (initial or capped) between attempts.
MAX_BACKOFF_DELAY_S = 24 * 3600
#: The largest factor a backoff delay may grow by from one attempt to the next.
MAX_MULTIPLIER = 10
#: The longest description a job may have, in characters.
MAX_DESCRIPTION = 1024


def _within(name: str, value: float | None, low: float, high: float, unit: str) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidField(name, f"must be between {low} and {high} {unit}")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0
    initial_delay_s: float = 10.0
    multiplier: float = 2.0
    max_delay_s: float = 300.0

    def check(self, path: str = "retry") -> None:
        """Each field within its bounds (``InvalidField`` naming it otherwise)."""
        _within(f"{path}.max_retries", self.max_retries, 0, MAX_RETRIES, "retries")
        for name, delay in (("initial_delay_s", self.initial_delay_s), ("max_delay_s", self.max_delay_s)):
            if not 0 < delay <= MAX_BACKOFF_DELAY_S:
                raise InvalidField(f"{path}.{name}", f"must be more than 0 and at most {MAX_BACKOFF_DELAY_S} seconds")
        _within(f"{path}.multiplier", self.multiplier, 1, MAX_MULTIPLIER, "times")


@dataclass(frozen=True)
class RetryChange:
    """A change of a job's retries (a PATCH): each field given replaces the job's own, the others stay. It is
    merged with the job as its change reads it, inside the compare-and-set loop, so a change of the other
    fields landing meanwhile is kept, never overwritten by a copy read before it (#34)."""

    max_retries: int | None = None
    initial_delay_s: float | None = None
    multiplier: float | None = None
    max_delay_s: float | None = None

    @classmethod
    def whole(cls, policy: RetryPolicy) -> RetryChange:
        """The change that makes a job's retries ``policy``, whatever they were."""
        return cls(policy.max_retries, policy.initial_delay_s, policy.multiplier, policy.max_delay_s)

    def applied_to(self, current: RetryPolicy) -> RetryPolicy:
        def pick(given: float | None, kept: float) -> float:
            return kept if given is None else given

        return RetryPolicy(
            max_retries=current.max_retries if self.max_retries is None else self.max_retries,
            initial_delay_s=pick(self.initial_delay_s, current.initial_delay_s),
            multiplier=pick(self.multiplier, current.multiplier),
            max_delay_s=pick(self.max_delay_s, current.max_delay_s),
        )


@dataclass(frozen=True)
class JobSpec:
    """Every option of a job its user controls. A field's default is what a request that leaves it out gets."""

    schedule: Schedule
    #: Any JSON value, handed to the job's executions (its size is bounded per tenant: ``JobChecks.payload``).
    payload: Any
    #: The topic its executions are published to; None: in a request, the tenant's default; in a job, it has a
    #: ``target`` instead (the two are exclusive).
    topic: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: Seconds an execution may run without reporting before it counts as failed (None: no limit).
    timeout_s: int | None = None
    #: A window after each scheduled fire within which its execution is due (``domain.jobs.due_of``; None: at the
    #: fire).
    jitter_s: int | None = None
    #: The user's key/value labels (``domain.tags``): lists and bulk changes select jobs by them.
    tags: dict[str, str] = field(default_factory=dict)
    #: The tenant's calendar (``domain.calendars``) whose excluded dates its fires skip (None: none).
    calendar: str | None = None
    #: Delete the job once its schedule has no fire left and its last executions have ended (``domain.retire``).
    delete_after_last: bool = False
    #: What a fire does while the previous execution has not reported (``domain.policies``; what it decides:
    #: ``domain.policy_decisions``).
    overlap: Overlap = Overlap.ALLOW_ALL
    #: Which missed fires are replayed (the misfire policy; the default replays every one).
    catch_up: CatchUp = field(default_factory=CatchUp)
    #: A note in the user's words (what the job is for, who to ask), shown with the job; it changes nothing else.
    description: str | None = None
    #: Where its executions are delivered when no worker consumes them (``domain.targets``: an HTTPS endpoint, a
    #: Lambda function or an SQS queue); None: to the workers of its topic. A job with a target has no topic.
    target: Target | None = None

    def checked(self) -> JobSpec:
        """This spec, if every field keeps its own rule; else ``InvalidField`` naming the first that does not."""
        _within("timeout_s", self.timeout_s, 1, MAX_TIMEOUT_S, "seconds")
        _within("jitter_s", self.jitter_s, 1, MAX_JITTER_S, "seconds")
        parse_tags(self.tags)
        check_catch_up(self.catch_up)
        self.retry.check()
        if self.description is not None and len(self.description) > MAX_DESCRIPTION:
            raise InvalidField("description", f"must be at most {MAX_DESCRIPTION} characters")
        if self.target is not None:
            self._check_target(self.target)
        return self

    def _check_target(self, target: Target) -> None:
        """A job with a target: its target's own rules, no topic, and no cancel (a call in flight cannot be
        cancelled). (The context keywords its payload may use are the service's check: ``JobChecks.keywords``.)"""
        target.checked(f"target.{next(iter(target.to_dict()))}")
        if self.topic is not None:
            raise InvalidField("topic", "a job with a target has no topic: remove one of them")
        if self.overlap is Overlap.CANCEL_OTHER:
            raise InvalidField("overlap", "cancel_other needs workers that cancel; a target's call cannot be "
                                          "cancelled")

    def plain(self) -> dict[str, Any]:
        """Each field's value as JSON holds it (a schedule, a retry policy or a catch-up policy as its dict)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    def digest(self) -> str:
        """Digest of the spec a request asks for, to tell a retried submission from a different one with the same
        key. Digests are stored with their keys, so a field holds its place only when it is not its default: a
        spec that leaves a newer option out has the digest it had before the option existed."""
        plain = self.plain()
        body = {f.name: plain[f.name] for f in fields(self)
                if f.name in _ALWAYS_DIGESTED or getattr(self, f.name) != _default(f)}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


#: The fields a digest holds whatever their value: those of the first digests.
_ALWAYS_DIGESTED = frozenset({"schedule", "payload", "topic", "retry", "timeout_s"})
#: The names of the spec's fields.
SPEC_FIELDS = tuple(f.name for f in fields(JobSpec))


def _default(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else MISSING


def _plain(value: Any) -> Any:
    """A field's value as JSON holds it (a schedule or a catch-up policy by its ``to_dict``)."""
    if isinstance(value, Enum):
        return value.value
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value


class SpecChange:
    """A PATCH: the spec's fields the request named, each with its value (None is a value: it clears a field whose
    None means none), applied to the spec read in the compare-and-set loop (``applied_to``). A ``RetryChange``
    is merged with the retries read, so only the retry fields named change."""

    def __init__(self, **named: Any) -> None:
        unknown = sorted(set(named) - set(SPEC_FIELDS))
        if unknown:
            raise TypeError(f"not a field of a job's spec: {', '.join(unknown)}")
        self.named: Mapping[str, Any] = MappingProxyType(dict(named))

    def __contains__(self, name: str) -> bool:
        return name in self.named

    def __repr__(self) -> str:
        return f"SpecChange({', '.join(f'{k}={v!r}' for k, v in self.named.items())})"

    def applied_to(self, spec: JobSpec) -> JobSpec:
        """``spec`` with the named fields changed, checked again (``JobSpec.checked``). A change that gives a
        target and names no topic also removes the topic: the job moves from its topic's workers to the target.
        (One that removes a target leaves the topic it names, or none: the service gives the tenant's default.)"""
        updates: dict[str, Any] = {name: value.applied_to(getattr(spec, name)) if isinstance(value, RetryChange)
                                   else value for name, value in self.named.items()}
        if self.named.get("target") is not None and "topic" not in self.named:
            updates["topic"] = None
        return replace(spec, **updates).checked()
