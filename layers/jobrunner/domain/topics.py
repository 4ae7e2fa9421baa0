"""Which topics a tenant's jobs may publish to.

A deployment allows a set of topics (``JOBRUNNER_ALLOWED_TOPICS``). With no per-tenant grants, every
tenant may name any of them (one team, or teams that trust each other). With grants
(``JOBRUNNER_TENANT_TOPICS``), a tenant may name only the topics granted to it, or to ``*`` (every
tenant not named) when it has no entry of its own; a tenant with neither may name none, so a new
tenant publishes nowhere until it is granted a topic. A job without a topic goes to the deployment's
default topic if its tenant may use it, else to the first topic granted to its tenant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

#: The key of the grants that apply to every tenant without an entry of its own.
EVERY_OTHER_TENANT = "*"
#: The names Kafka accepts for a topic.
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def is_topic_name(name: str) -> bool:
    """Whether Kafka accepts ``name`` for a topic: 1-249 letters, digits, ``.``, ``_`` or ``-``."""
    return bool(_TOPIC_NAME.match(name))


@dataclass(frozen=True)
class TopicGrants:
    default: str
    allowed: frozenset[str]
    #: tenant (or ``*``) -> the topics it may name, in order of preference; empty: no per-tenant grants.
    per_tenant: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.default not in self.allowed:
            raise ValueError(f"the default topic {self.default!r} is not an allowed topic")
        for tenant, topics in self.per_tenant.items():
            if unknown := sorted(set(topics) - self.allowed):
                raise ValueError(f"tenant {tenant!r} is granted topics that are not allowed: {unknown}")

    def topics_of(self, tenant: str) -> tuple[str, ...]:
        """The topics ``tenant`` may name (every allowed one when there are no per-tenant grants)."""
        if not self.per_tenant:
            return tuple(sorted(self.allowed))
        return self.per_tenant.get(tenant, self.per_tenant.get(EVERY_OTHER_TENANT, ()))

    def permits(self, tenant: str, topic: str) -> bool:
        return topic in self.allowed and topic in self.topics_of(tenant)

    def default_for(self, tenant: str) -> str | None:
        """Where a job of ``tenant`` that names no topic goes; None when the tenant may name no topic."""
        if self.permits(tenant, self.default):
            return self.default
        topics = self.topics_of(tenant)
        return topics[0] if topics else None
