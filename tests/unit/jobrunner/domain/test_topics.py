"""Which topics a tenant may name."""

from __future__ import annotations

import pytest

from jobrunner.domain.topics import TopicGrants, is_topic_name

ALLOWED = frozenset({"jobs", "payments", "reports"})


def test_without_grants_every_tenant_may_name_every_allowed_topic() -> None:
    grants = TopicGrants("jobs", ALLOWED)
    assert grants.topics_of("anyone") == ("jobs", "payments", "reports")
    assert grants.permits("anyone", "payments") and not grants.permits("anyone", "elsewhere")
    assert grants.default_for("anyone") == "jobs"


def test_with_grants_a_tenant_may_name_only_its_own_topics() -> None:
    grants = TopicGrants("jobs", ALLOWED, {"payments-team": ("payments", "jobs"), "reporting": ("reports",)})
    assert grants.permits("payments-team", "payments") and grants.permits("payments-team", "jobs")
    assert not grants.permits("reporting", "payments") and not grants.permits("payments-team", "reports")
    # a job that names no topic: the deployment's default if granted, else the tenant's first topic
    assert (grants.default_for("payments-team"), grants.default_for("reporting")) == ("jobs", "reports")


def test_a_tenant_without_an_entry_gets_the_star_entry_or_nothing() -> None:
    with_star = TopicGrants("jobs", ALLOWED, {"payments-team": ("payments",), "*": ("jobs",)})
    assert (with_star.topics_of("newcomer"), with_star.default_for("newcomer")) == (("jobs",), "jobs")
    without = TopicGrants("jobs", ALLOWED, {"payments-team": ("payments",)})
    assert (without.topics_of("newcomer"), without.default_for("newcomer")) == ((), None)
    assert not without.permits("newcomer", "jobs")


def test_a_grant_of_a_topic_the_deployment_does_not_allow_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match=r"tenant 'payments-team' is granted topics that are not allowed: \['x'\]"):
        TopicGrants("jobs", ALLOWED, {"payments-team": ("payments", "x")})


@pytest.mark.parametrize(("name", "accepted"), [
    ("jobs", True), ("payments.v2_eu-west", True), ("x" * 249, True),
    ("", False), ("pay ments", False), ("reports/daily", False), ("x" * 250, False),
])
def test_a_topic_name_is_one_kafka_accepts(name: str, accepted: bool) -> None:
    assert is_topic_name(name) is accepted
