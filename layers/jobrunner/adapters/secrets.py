"""Where the key that signs result tokens comes from (``domain.receipts``).

In order: ``JOBRUNNER_RESULT_KEY`` (the key itself); ``JOBRUNNER_RESULT_KEY_SECRET_ARN`` (a Secrets Manager
secret whose string is the key, read once per cold start: the stack's ``ResultKey``); else, on the local
stack only, a key derived from the keyspace's name, the same in every process that uses that keyspace
(not a secret: anyone who knows the name can compute it, which is fine on one's own machine). In Lambda a
function that needs the key and has neither setting refuses to start rather than sign with a known key.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobrunner.config import Settings


class MissingResultKey(RuntimeError):
    """Running in Lambda without a result key configured."""


def result_key(settings: Settings, secrets_client: Any = None) -> bytes:
    if settings.result_key:
        return settings.result_key.encode("utf-8")
    if settings.result_key_secret_arn:
        if secrets_client is None:
            import boto3

            secrets_client = boto3.client("secretsmanager", region_name=settings.region)
        secret = secrets_client.get_secret_value(SecretId=settings.result_key_secret_arn)
        return str(secret["SecretString"]).encode("utf-8")
    if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        raise MissingResultKey("set JOBRUNNER_RESULT_KEY_SECRET_ARN (or JOBRUNNER_RESULT_KEY): results are checked "
                               "against a key the workers never see")
    return hashlib.sha256(f"jobrunner-local-result-key:{settings.cassandra.keyspace}".encode()).digest()
