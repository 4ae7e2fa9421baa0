"""Finding the API: a stage's stack outputs (SigV4, or a bearer token), or a URL with the local stack's token."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import botocore.exceptions
import pytest
from botocore.credentials import Credentials

from infra.smoke.target import TargetError, stage_target, url_target
from jobrunner_client.cli.client import BearerAuth, HttpRequest, SigV4Auth
from tests.infra.smoke.fakes import URL

if TYPE_CHECKING:
    from pathlib import Path


class FakeCloudFormation:
    """``describe_stacks`` of one stack (or none), in a region."""

    exceptions = botocore.exceptions

    def __init__(self, region: str, stacks: dict[str, dict[str, Any]]) -> None:
        self.meta = type("Meta", (), {"region_name": region})()
        self.stacks = stacks
        self.asked: list[str] = []

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        self.asked.append(StackName)
        if StackName not in self.stacks:
            raise botocore.exceptions.ClientError(
                {"Error": {"Code": "ValidationError", "Message": f"Stack with id {StackName} does not exist"}},
                "DescribeStacks")
        return {"Stacks": [self.stacks[StackName]]}


def deployed(status: str = "UPDATE_COMPLETE", **outputs: str) -> dict[str, Any]:
    return {"StackStatus": status, "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()]}


CREDENTIALS = Credentials("AKIDEXAMPLE", "secret")


def test_a_stage_is_its_stacks_api_url_signed_with_sigv4_in_the_urls_region() -> None:
    cloudformation = FakeCloudFormation("eu-west-1", {"JobRunner-dev": deployed(ApiUrl=URL)})
    target = stage_target("dev", region=None, token=None, cloudformation=cloudformation, credentials=CREDENTIALS)
    assert (cloudformation.asked, target.url) == (["JobRunner-dev"], URL)
    assert isinstance(target.auth, SigV4Auth)
    signed = target.auth.sign(HttpRequest("GET", URL + "jobs"))
    assert "/eu-west-1/execute-api/aws4_request" in signed.headers["Authorization"]
    assert target.where == f"stack JobRunner-dev in eu-west-1, {URL} (SigV4)"


def test_a_stage_with_a_token_uses_it_instead_of_sigv4() -> None:
    cloudformation = FakeCloudFormation("eu-west-1", {"JobRunner-prod": deployed(ApiUrl=URL)})
    target = stage_target("prod", region="eu-west-1", token="id-token", cloudformation=cloudformation)
    assert isinstance(target.auth, BearerAuth) and target.where.endswith("(bearer token)")


@pytest.mark.parametrize(("stacks", "message"), [
    ({}, "no stack JobRunner-dev in us-east-1: deploy it first (make deploy, docs/deploy.md), or name its region"),
    ({"JobRunner-dev": deployed("ROLLBACK_COMPLETE", ApiUrl=URL)}, "stack JobRunner-dev in us-east-1 is "
                                                                   "ROLLBACK_COMPLETE, not deployed"),
    ({"JobRunner-dev": deployed(KeyspaceName="jobrunner_dev")}, "stack JobRunner-dev has no ApiUrl output"),
])
def test_a_stage_that_is_not_deployed_says_what_to_do(stacks: dict[str, Any], message: str) -> None:
    with pytest.raises(TargetError, match="^" + re.escape(message)):
        stage_target("dev", region=None, token=None, cloudformation=FakeCloudFormation("us-east-1", stacks))


def test_a_url_takes_the_token_the_local_stack_wrote(tmp_path: Path) -> None:
    (tmp_path / ".local").mkdir()
    (tmp_path / ".local" / "env").write_text("JOBRUNNER_API_URL=http://127.0.0.1:8080\nJOBRUNNER_TOKEN=abc\n")
    target = url_target(None, token=None, sigv4=False, region=None, environ={}, cwd=tmp_path)
    assert target.url == "http://127.0.0.1:8080" and isinstance(target.auth, BearerAuth)
    assert target.auth.sign(HttpRequest("GET", target.url)).headers["Authorization"] == "Bearer abc"
    assert target.where == "http://127.0.0.1:8080 (bearer token from .local/env)"


def test_a_url_without_a_token_says_where_one_comes_from(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match=re.escape("no token for http://127.0.0.1:8080: pass --token")):
        url_target("http://127.0.0.1:8080", token=None, sigv4=False, region=None, environ={}, cwd=tmp_path)
