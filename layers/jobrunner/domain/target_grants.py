"""Which targets a stage lets a job name (issue 35): its kinds, and the Lambda functions and SQS queues allowed.

A deployment allows some of the three kinds (``JOBRUNNER_TARGET_KINDS``; all three by default). A Lambda or SQS
target must also be allow-listed (``JOBRUNNER_TARGET_LAMBDA_ALLOW``, ``JOBRUNNER_TARGET_SQS_ALLOW``), each entry
being one of:

- ``*``: any function (or queue) the delivery function may reach;
- a 12-digit account id: any function (or queue) of that account, in any region;
- a function ARN (or a queue URL): that one. An unqualified function ARN allows its versions and aliases too
  (``...:function:name:prod``), as a function's IAM grant names ``name`` and ``name:*``.

An empty list allows none, so a stage reaches no one's function or queue until it says which. HTTPS targets
have no allow-list: their safety is the delivery's address rules (``domain.targets.addresses``), which a stage
widens with ``JOBRUNNER_TARGET_ADDRESS_ALLOW``. The grants are checked on submit and on a PATCH, and again by
the scan when it publishes (a target the stage no longer allows is dead-lettered).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.targets import HttpsTarget, LambdaTarget, SqsTarget, Target

#: The kinds of target, as a target's JSON shape names them.
TARGET_KINDS = ("https", "lambda", "sqs")
#: An allow-list entry that allows every function (or queue).
ANY = "*"
_ACCOUNT = re.compile(r"\d{12}")


def kind_of(target: Target) -> str:
    """The kind of ``target``: ``https``, ``lambda`` or ``sqs`` (the key of its JSON shape)."""
    if isinstance(target, HttpsTarget):
        return "https"
    return "lambda" if isinstance(target, LambdaTarget) else "sqs"


def check_allow_entry(entry: str, kind: str) -> str:
    """``entry`` if it is ``*``, an account id, or a function ARN (``kind`` lambda) or queue URL (sqs); else
    ``ValueError`` saying what it should be (a setting, checked when the stage's settings are read)."""
    if entry == ANY or _ACCOUNT.fullmatch(entry):
        return entry
    try:
        (LambdaTarget(entry) if kind == "lambda" else SqsTarget(entry, None)).checked()
    except InvalidField as wrong:
        if not (kind == "sqs" and wrong.field.endswith("message_group_id")):  # a FIFO queue needs no group here
            what = "function ARN" if kind == "lambda" else "queue URL"
            raise ValueError(f"{entry!r} is neither *, a 12-digit account id nor a {what}") from None
    return entry


@dataclass(frozen=True)
class TargetGrants:
    """A stage's rules for targets (module docstring)."""

    kinds: frozenset[str] = frozenset(TARGET_KINDS)
    lambda_allow: tuple[str, ...] = ()
    sqs_allow: tuple[str, ...] = ()

    def check(self, target: Target, path: str = "target") -> None:
        """``InvalidField`` if the stage does not allow ``target``: its kind (at ``path``) or, for a function or
        a queue, that one (at ``path.lambda.function_arn`` or ``path.sqs.queue_url``)."""
        kind = kind_of(target)
        if kind not in self.kinds:
            allowed = ", ".join(k for k in TARGET_KINDS if k in self.kinds) or "none"
            raise InvalidField(path, f"{kind} targets are not allowed here; allowed: {allowed}")
        if isinstance(target, LambdaTarget) and not _allowed(self.lambda_allow, target.function_arn,
                                                             target.account, _unqualified(target)):
            raise InvalidField(f"{path}.lambda.function_arn", "is not a function this deployment may invoke "
                                                              "(its allow-list)")
        if isinstance(target, SqsTarget) and not _allowed(self.sqs_allow, target.queue_url, target.account, None):
            raise InvalidField(f"{path}.sqs.queue_url", "is not a queue this deployment may send to (its allow-list)")

    def refusal(self, target: Target) -> str | None:
        """Why the stage does not allow ``target`` (``check``'s reason, with its field), or None if it does."""
        try:
            self.check(target)
        except InvalidField as wrong:
            return f"{wrong.field} {wrong.reason}"
        return None


def _unqualified(target: LambdaTarget) -> str | None:
    """The ARN of ``target``'s function without its version or alias, if it names one."""
    qualifier = target.qualifier
    return target.function_arn.removesuffix(f":{qualifier}") if qualifier is not None else None


def _allowed(entries: tuple[str, ...], name: str, account: str, unqualified: str | None) -> bool:
    return any(entry in (ANY, account, name, unqualified) for entry in entries)
