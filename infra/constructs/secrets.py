"""The result key: the secret the scans sign execution messages' ``result_token`` with, and the results
function checks them with (``jobrunner.domain.receipts``).

A Secrets Manager secret whose SecretString is the key itself: 64 random letters and digits, generated
by Secrets Manager at create time (it never appears in the template). The functions that need it get its
ARN in ``JOBRUNNER_RESULT_KEY_SECRET_ARN`` and read it once per cold start; workers never may (the
stack grants it to the scan and results functions only, and not in the worker policy).

No automatic rotation: a new key invalidates the token of every execution message already published
and not yet answered, so a rotation is a deploy-time step in a quiet window (docs/deploy.md, "The result
key"). It is encrypted with Secrets Manager's AWS managed key (``aws/secretsmanager``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.constructs.nag import acknowledge
from jobrunner.config import Settings

if TYPE_CHECKING:
    from aws_cdk import RemovalPolicy

#: The variable the runtime reads the secret's ARN from (``JOBRUNNER_RESULT_KEY`` carries a key itself,
#: for local use only).
RESULT_KEY_SECRET_ARN_ENV = Settings.variable("result_key_secret_arn")
#: Characters of the generated key (letters and digits: about 380 bits).
KEY_LENGTH = 64


class ResultKey(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.secret = secretsmanager.Secret(
            self, "Secret",
            description="Job runner result key: HMAC key of the executions' result tokens (scan and results only)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=KEY_LENGTH, exclude_punctuation=True, include_space=False,
                require_each_included_type=True,
            ),
            removal_policy=removal_policy,
        )
        acknowledge(self.secret, {
            "AwsSolutions-SMG4": "No automatic rotation: a new key invalidates the result token of every execution "
                                 "in flight (published, not yet answered), whose results would then be refused. "
                                 "Rotate by deploying a new secret version in a quiet window (docs/deploy.md, "
                                 "'The result key').",
        })

    @property
    def secret_arn(self) -> str:
        return self.secret.secret_arn

    @property
    def environment(self) -> dict[str, str]:
        """What a function that signs or checks result tokens needs in its environment."""
        return {RESULT_KEY_SECRET_ARN_ENV: self.secret_arn}

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """``secretsmanager:GetSecretValue`` (and ``DescribeSecret``) on this secret only."""
        return self.secret.grant_read(grantee)


#: What a holder of the tenants' webhook secrets calls (``adapters/webhook_secrets/secretsmanager.py``): reads
#: them, creates a tenant's on its first use, writes a rotation and its end. Never a delete or a policy change.
WEBHOOK_SECRET_ACTIONS = ("secretsmanager:GetSecretValue", "secretsmanager:CreateSecret",
                          "secretsmanager:PutSecretValue")


def grant_webhook_secrets(role: iam.IRole, prefix: str, *, why: str) -> None:
    """Let ``role`` keep the tenants' webhook secrets: ``WEBHOOK_SECRET_ACTIONS`` on the secrets named ``<prefix>*``
    only (a stage's own prefix: another stage's secrets are out of reach). ``why`` the role needs them."""
    secrets = f"arn:{Aws.PARTITION}:secretsmanager:{Aws.REGION}:{Aws.ACCOUNT_ID}:secret:{prefix}*"
    role.add_to_principal_policy(iam.PolicyStatement(actions=list(WEBHOOK_SECRET_ACTIONS), resources=[secrets]))
    acknowledge(role, {
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:"
        f"{prefix}*]": f"One secret per tenant, named <prefix><tenant>, {why}: the tenants are not known at deploy "
                       "time; the prefix is the stage's.",
    })
