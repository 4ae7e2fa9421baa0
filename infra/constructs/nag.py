"""cdk-nag acknowledgements, each with the reason it does not apply here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, Validations

if TYPE_CHECKING:
    from collections.abc import Mapping

    from constructs import IConstruct


def acknowledge(scope: IConstruct, findings: Mapping[str, str]) -> None:
    """Acknowledge ``{finding id: reason}`` on ``scope`` and everything below it.

    Finding ids are exact, e.g. ``AwsSolutions-IAM5[Resource::*]``: cdk-nag v3 has no prefix match,
    so a new wildcard shows up as a new finding instead of hiding behind an old acknowledgement.
    """
    Validations.of(scope).acknowledge(*(Acknowledgment(id=rule, reason=reason) for rule, reason in findings.items()))
