"""The checks of a job's fields that need the tenant or the stage, on submit and on a PATCH: its topic or its
target, its payload and calendar (the rules a spec keeps on its own are ``JobSpec.checked``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobrunner.domain.errors import Forbidden, InvalidField
from jobrunner.domain.limits import payload_refusal
from jobrunner.domain.targets.templates import KEYWORDS, unknown_keywords
from jobrunner.ports import CalendarStore
from jobrunner.services.calendars import check_calendar

if TYPE_CHECKING:
    from jobrunner.domain.calendars import Calendar
    from jobrunner.domain.spec import JobSpec
    from jobrunner.services.jobs.models import JobRules


class NoCalendars(CalendarStore):
    """The calendars of a service given none: every tenant has none, so a job naming one is refused (422)."""

    def put(self, calendar: Calendar) -> None:
        raise NotImplementedError("no calendars are kept here")

    def get(self, user_id: str, name: str) -> Calendar | None:
        return None

    def list(self, user_id: str, limit: int, after: str | None = None) -> list[Calendar]:
        return []

    def delete(self, user_id: str, name: str) -> None:
        return None


class JobChecks:
    """A job's fields held against the deployment's rules and the tenant's grants, limits and calendars."""

    def __init__(self, rules: JobRules, calendars: CalendarStore) -> None:
        self._rules = rules
        self._calendars = calendars

    def topic(self, user_id: str, topic: str | None) -> str:
        """A topic the deployment does not allow is a wrong field (422); an allowed one that is not granted
        to this tenant is refused (403), naming the topics the tenant may use."""
        grants = self._rules.topics
        chosen = topic or grants.default_for(user_id)
        if chosen is not None and chosen not in grants.allowed:
            raise InvalidField("topic", f"not an allowed topic; allowed: {sorted(grants.allowed)}")
        if chosen is None or not grants.permits(user_id, chosen):
            mine = list(grants.topics_of(user_id))
            raise Forbidden("topic", f"{chosen!r} is not granted to this tenant; granted: {mine}" if chosen
                            else "no topic is granted to this tenant")
        return chosen

    def route(self, user_id: str, spec: JobSpec) -> str | None:
        """The topic ``spec``'s executions go to, checked: the one it names or the tenant's default (``topic``);
        None for a job with a target, once the stage allows the target (``InvalidField`` naming it otherwise)."""
        if spec.target is not None:
            self._rules.targets.check(spec.target)
            return None
        return self.topic(user_id, spec.topic)

    def payload_limit(self, user_id: str) -> int:
        """The largest payload (serialized, in bytes) the tenant may give a job: the lower of the deployment's
        and its own limit."""
        return min(self._rules.max_payload_bytes, self._rules.limits.of(user_id).payload_bytes)

    def payload(self, user_id: str, payload: Any) -> None:
        refusal = payload_refusal(payload, self.payload_limit(user_id))
        if refusal is not None:
            raise InvalidField("payload", refusal)

    @staticmethod
    def keywords(spec: JobSpec) -> None:
        """A job with a target uses only the context keywords its delivery substitutes in its payload
        (``domain.targets.templates``): an unknown ``<jobrunner.NAME>`` is a wrong payload, named in the
        reason. A worker's job keeps such text as written."""
        if spec.target is not None and (unknown := unknown_keywords(spec.payload)):
            known = ", ".join(f"<jobrunner.{name}>" for name in KEYWORDS)
            raise InvalidField("payload", f"{unknown[0]} is not a context keyword; known: {known}")

    def calendar(self, user_id: str, name: str | None, recurring: bool) -> None:
        """``services.calendars.check_calendar`` on the tenant's calendars (one read, for a job that names one)."""
        check_calendar(self._calendars, user_id, name, recurring)
