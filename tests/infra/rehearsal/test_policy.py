"""The rehearsal's IAM decisions, held to what AWS decides: resources by ARN, the action names IAM checks (item by
item in a transaction), and the DynamoDB condition keys the stack's grants use."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.rehearsal.policy import Authorization, Request, authorizations, decide, expression_attributes

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/Counters"
COUNTS: dict[str, Any] = {"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"], "Resource": TABLE,
          "Condition": {"ForAllValues:StringEquals": {"dynamodb:Attributes": ["tenant", "window", "jobs", "rev"]}}}


def dynamodb(operation: str, body: dict[str, Any]) -> list[Authorization]:
    request = Request("dynamodb", operation, "us-east-1", "123456789012", "/", json.dumps(body).encode())
    return authorizations(request, lambda table: "tenant")


def update(expression: str, **extra: Any) -> dict[str, Any]:
    return {"TableName": "Counters", "Key": {"tenant": {"S": "alice"}, "window": {"N": "0"}},
            "UpdateExpression": expression, "ExpressionAttributeValues": {":v": {"N": "1"}}, **extra}


def test_a_grant_on_one_table_allows_nothing_on_another() -> None:
    (other,) = dynamodb("UpdateItem", {**update("SET jobs = :v"), "TableName": "Other"})
    (mine,) = dynamodb("UpdateItem", update("SET jobs = :v"))

    assert (decide(mine, [COUNTS]), decide(other, [COUNTS])) == (True, False)


def test_an_update_may_touch_only_the_attributes_a_condition_lists() -> None:
    checked = update("SET jobs = :v, rev = :v", ConditionExpression="attribute_not_exists(rev)")
    (allowed,) = dynamodb("UpdateItem", checked)
    (denied,) = dynamodb("UpdateItem", update("ADD admitted :v"))
    (named,) = dynamodb("UpdateItem", update("SET #a = :v", ExpressionAttributeNames={"#a": "admitted"}))

    assert decide(allowed, [COUNTS]) and not decide(denied, [COUNTS]) and not decide(named, [COUNTS])


def test_a_read_with_no_projection_reads_every_attribute() -> None:
    key = {"TableName": "Counters", "Key": {"tenant": {"S": "alice"}, "window": {"N": "0"}}}
    (everything,) = dynamodb("GetItem", key)
    (projected,) = dynamodb("GetItem", {**key, "ProjectionExpression": "jobs, rev"})

    assert (decide(everything, [COUNTS]), decide(projected, [COUNTS])) == (False, True)


def test_a_transaction_is_authorized_item_by_item_as_the_items_actions() -> None:
    body = {"TransactItems": [{"Update": update("SET jobs = :v")}, {"Update": update("SET counted = :v")}]}
    first, second = dynamodb("TransactWriteItems", body)

    assert (first.action, decide(first, [COUNTS]), decide(second, [COUNTS])) == ("dynamodb:UpdateItem", True, False)


def test_leading_keys_limit_an_update_to_the_items_of_one_partition() -> None:
    own = {"Effect": "Allow", "Action": "dynamodb:UpdateItem", "Resource": TABLE,
           "Condition": {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["-2"]}}}
    (mine,) = dynamodb("UpdateItem", {**update("SET s = :v"), "Key": {"tenant": {"N": "-2"}, "window": {"N": "0"}}})
    (theirs,) = dynamodb("UpdateItem", {**update("SET s = :v"), "Key": {"tenant": {"N": "3"}, "window": {"N": "0"}}})

    assert (decide(mine, [own]), decide(theirs, [own])) == (True, False)


def test_an_update_that_returns_the_item_is_refused_where_only_none_is_allowed() -> None:
    quiet = {**COUNTS, "Condition": {**COUNTS["Condition"],
                                     "StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE"]}}}
    (plain,) = dynamodb("UpdateItem", update("SET jobs = :v"))
    (returning,) = dynamodb("UpdateItem", update("SET jobs = :v", ReturnValues="ALL_NEW"))

    assert (decide(plain, [quiet]), decide(returning, [quiet])) == (True, False)


def test_a_deny_wins_and_lambda_invoke_is_invoke_function_on_the_functions_arn() -> None:
    request = Request("lambda", "Invoke", "us-east-1", "123456789012",
                      "/2015-03-31/functions/jobrunner-dev-scan/invocations", b"{}")
    (invoke,) = authorizations(request, lambda table: "")
    arn = "arn:aws:lambda:us-east-1:123456789012:function:jobrunner-dev-scan"
    allow = {"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": arn}

    assert invoke == Authorization("lambda:InvokeFunction", arn)
    assert decide(invoke, [allow]) and not decide(invoke, [allow, {**allow, "Effect": "Deny"}])
    assert not decide(invoke, [{**allow, "Resource": f"{arn}-other"}])


def test_an_unknown_condition_operator_fails_the_rehearsal_rather_than_pass() -> None:
    (mine,) = dynamodb("UpdateItem", update("SET jobs = :v"))
    with pytest.raises(ValueError, match="NumericLessThan"):
        decide(mine, [{**COUNTS, "Condition": {"NumericLessThan": {"dynamodb:Attributes": "1"}}}])


def test_expression_attributes_are_the_top_level_names() -> None:
    expression = "SET a.b = if_not_exists(c, :v), #d[0] = :w ADD e :x REMOVE f AND NOT g"
    assert expression_attributes(expression, {"#d": "d"}) == {"a", "c", "d", "e", "f", "g"}
