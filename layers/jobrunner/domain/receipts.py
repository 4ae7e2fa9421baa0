"""Result tokens: a result is accepted only from a holder of its execution's message (DESIGN.md).

Every execution message carries ``result_token``, an HMAC-SHA256 of its ``execution_id`` under a key that
only the scans (which sign) and the results function (which checks) hold; workers never see the key.
A worker sends the token back with its result; a result whose token is missing or wrong is refused.
Knowing a job id, or computing an execution id (a uuid5 of public fields), is not enough to forge one,
and a token names one execution, so another execution's token (a tenant's own, say) does not fit.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

#: What a token signs, besides the execution id: a token of this scheme can never be taken for another's.
_CONTEXT = b"jobrunner-result-token-v1:"


def result_token(key: bytes, execution_id: str) -> str:
    """The token of ``execution_id`` under ``key`` (43 URL-safe characters)."""
    digest = hmac.new(key, _CONTEXT + execution_id.encode("utf-8"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def token_fits(key: bytes, execution_id: str, token: str | None) -> bool:
    """Whether ``token`` is ``execution_id``'s under ``key`` (in constant time)."""
    if not token:
        return False
    return hmac.compare_digest(result_token(key, execution_id), token)
