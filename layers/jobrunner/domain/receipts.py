"""Result tokens: a result is accepted only from a holder of its execution's message (DESIGN.md).

Every execution message carries ``result_token``, an HMAC-SHA256 under a key that only the scans (which
sign) and the results function (which checks) hold; workers never see the key. A token (scheme v2) signs
the execution's tenant (its job's ``user_id``), its ``execution_id`` and its attempt, and the results
function checks it against what the store holds for that execution, not against what the report claims:
a token fits one attempt of one execution of one tenant, and nothing else. Knowing a job id, or computing
an execution id (a uuid5 of public fields), is not enough to forge one.

Upgrade: the first scheme (v1) signed the ``execution_id`` alone. A v1 token never fits as a v2 one (each
scheme signs its own context string), and the scans sign only v2 now. Messages published by older scans
may still be out when a stack is upgraded: the results function accepts their v1 tokens, for the execution
each names only, while ``ResultRules.accept_v1_tokens`` is set (``JOBRUNNER_ACCEPT_V1_RESULT_TOKENS``, true
by default, so that an upgrade refuses no result of an execution already out), and logs each one it
accepts. Turn it off once every execution published before the upgrade has ended (with a ``timeout_s``, that
long after the deploy at the latest), or from the start on a stack that never ran the first scheme; a later
release drops v1. While the scan and results functions are being updated, a results function still on the
older release refuses the v2 tokens of a scan already on the new one; those executions end by their
watchdog (retried or dead-lettered) or stay RUNNING without a ``timeout_s``: deploy in a quiet window (the
tick's rule disabled, as for a key rotation) where that matters.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

#: What a token signs first: a token of one scheme can never be taken for another's.
_CONTEXT = b"jobrunner-result-token-v2"
_CONTEXT_V1 = b"jobrunner-result-token-v1:"


def _field(value: bytes) -> bytes:
    """``value`` prefixed with its length (4 bytes): fields side by side can be read back only one way."""
    return len(value).to_bytes(4, "big") + value


def _encode(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def result_token(key: bytes, *, tenant: str, execution_id: str, attempt: int) -> str:
    """The token of attempt ``attempt`` of execution ``execution_id`` of ``tenant``, under ``key`` (43 URL-safe
    characters)."""
    signed = _CONTEXT + b"".join(_field(part) for part in (
        tenant.encode("utf-8"), execution_id.encode("utf-8"), str(attempt).encode("ascii")))
    return _encode(hmac.new(key, signed, hashlib.sha256).digest())


def v1_result_token(key: bytes, execution_id: str) -> str:
    """The first scheme's token of ``execution_id`` (what older scans signed; checked only during an upgrade)."""
    return _encode(hmac.new(key, _CONTEXT_V1 + execution_id.encode("utf-8"), hashlib.sha256).digest())


def token_fits(key: bytes, token: str | None, *, tenant: str, execution_id: str, attempt: int) -> bool:
    """Whether ``token`` is that of attempt ``attempt`` of execution ``execution_id`` of ``tenant`` under ``key``
    (compared in constant time)."""
    expected = result_token(key, tenant=tenant, execution_id=execution_id, attempt=attempt)
    return _same(expected, token)


def v1_token_fits(key: bytes, token: str | None, *, execution_id: str) -> bool:
    """Whether ``token`` is the first scheme's token of ``execution_id`` under ``key`` (during an upgrade only)."""
    return _same(v1_result_token(key, execution_id), token)


def _same(expected: str, token: str | None) -> bool:
    # a token is ASCII, and compare_digest raises on a str with anything else in it
    return token is not None and token.isascii() and hmac.compare_digest(expected, token)
