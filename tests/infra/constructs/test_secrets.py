from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template

from infra.constructs.secrets import KEY_LENGTH, RESULT_KEY_SECRET_ARN_ENV, ResultKey

if TYPE_CHECKING:
    import aws_cdk as cdk


def test_the_key_is_generated_by_secrets_manager_never_written_in_the_template(stack: cdk.Stack) -> None:
    ResultKey(stack, "ResultKey", removal_policy=RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)
    template = Template.from_stack(stack)

    template.resource_count_is("AWS::SecretsManager::Secret", 1)
    template.has_resource("AWS::SecretsManager::Secret", {
        "Properties": {
            "GenerateSecretString": {"PasswordLength": 64, "ExcludePunctuation": True, "IncludeSpace": False,
                                     "RequireEachIncludedType": True},
            "SecretString": Match.absent(),
        },
        "DeletionPolicy": "RetainExceptOnCreate",
        "UpdateReplacePolicy": "Retain",
    })
    assert KEY_LENGTH == 64
    # No rotation schedule: a new key would invalidate the tokens of the executions in flight
    template.resource_count_is("AWS::SecretsManager::RotationSchedule", 0)


def test_the_removal_policy_is_the_stacks(stack: cdk.Stack) -> None:
    ResultKey(stack, "ResultKey", removal_policy=RemovalPolicy.DESTROY)

    Template.from_stack(stack).has_resource("AWS::SecretsManager::Secret", {
        "DeletionPolicy": "Delete", "UpdateReplacePolicy": "Delete",
    })


def test_a_reader_gets_the_secrets_arn_and_may_read_that_secret_only(stack: cdk.Stack) -> None:
    key = ResultKey(stack, "ResultKey", removal_policy=RemovalPolicy.DESTROY)
    reader = iam.Role(stack, "Reader", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    key.grant_read(reader)
    template = Template.from_stack(stack)

    secret_id = stack.get_logical_id(key.secret.node.default_child)  # type: ignore[arg-type]
    assert stack.resolve(key.environment) == {RESULT_KEY_SECRET_ARN_ENV: {"Ref": secret_id}}
    assert RESULT_KEY_SECRET_ARN_ENV == "JOBRUNNER_RESULT_KEY_SECRET_ARN"
    (policy,) = template.find_resources("AWS::IAM::Policy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert "secretsmanager:GetSecretValue" in statement["Action"]
    assert all(a in ("secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret") for a in statement["Action"])
    assert statement["Resource"] == {"Ref": secret_id}
    assert [r["Ref"][:6] for r in policy["Properties"]["Roles"]] == ["Reader"]
