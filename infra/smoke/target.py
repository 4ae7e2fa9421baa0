"""Where the smoke test sends its requests: one code path, another URL.

- A stage (``--stage dev``): the stack ``JobRunner-<stage>``'s ``ApiUrl`` output, read with CloudFormation's
  ``DescribeStacks`` in the stage's region (``stages.<stage>.region`` of ``cdk.json``, else ``--region``, else the
  credentials'), and requests signed with SigV4 by the default credential chain; with ``--token`` a bearer token
  instead (a stage deployed with ``api_auth=cognito``: the user's ``IdToken``).
- A URL (``--url``): the local stack or any deployment; the bearer token from ``--token``, ``JOBRUNNER_TOKEN`` or
  the ``.local/env`` that ``make run`` writes (as the ``jobrunner`` command finds it), or SigV4 with ``--sigv4``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.config import cli_context, stack_name_of, stage_region
from infra.layer_build import ROOT
from jobrunner_client.cli.client import Auth, BearerAuth, SigV4Auth
from jobrunner_client.cli.settings import UsageError, region_of, resolve

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

#: Stack states in which the API is deployed and answering.
_READY = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
          "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "IMPORT_COMPLETE")


class TargetError(Exception):
    """The API could not be found (no such stack, no output, no URL or token): the message says what to do."""


@dataclass(frozen=True)
class Target:
    url: str
    auth: Auth
    #: In words, for the report: which stack or URL, and how requests are authenticated.
    where: str


def stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    """The outputs of ``stack_name``, by key; ``TargetError`` when it does not exist or is not deployed."""
    region = cloudformation.meta.region_name
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except cloudformation.exceptions.ClientError as exc:
        if exc.response["Error"]["Code"] == "ValidationError":  # "Stack with id ... does not exist"
            raise TargetError(f"no stack {stack_name} in {region}: deploy it first (make deploy, docs/deploy.md), "
                              f"or name its region with --region") from None
        raise
    status = stacks[0].get("StackStatus", "")
    if status not in _READY:
        raise TargetError(f"stack {stack_name} in {region} is {status}, not deployed: see docs/deploy.md, "
                          f"'A failed deploy, and cleaning up after one'")
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def stage_target(stage: str, *, region: str | None, token: str | None, cloudformation: Any = None,
                 credentials: Any = None) -> Target:
    """The API of the stage's stack. ``cloudformation`` and ``credentials`` are injected by tests."""
    region = region or stage_region(cli_context(ROOT / "cdk.json", []), stage)
    if cloudformation is None:
        import boto3

        cloudformation = boto3.client("cloudformation", region_name=region)
    name = stack_name_of(stage)
    outputs = stack_outputs(cloudformation, name)
    url = outputs.get("ApiUrl")
    if not url:
        raise TargetError(f"stack {name} has no ApiUrl output: is it this project's stack?")
    stack_region = cloudformation.meta.region_name
    if token:
        return Target(url, BearerAuth(token), f"stack {name} in {stack_region}, {url} (bearer token)")
    signing = region_of(url) or stack_region
    return Target(url, SigV4Auth(signing, credentials), f"stack {name} in {stack_region}, {url} (SigV4)")


def url_target(url: str | None, *, token: str | None, sigv4: bool, region: str | None,
               environ: Mapping[str, str], cwd: Path, env_file: Path | None = None) -> Target:
    """The API at ``url`` (else ``JOBRUNNER_API_URL`` or ``.local/env``'s), as the ``jobrunner`` command finds it."""
    try:
        connection = resolve(url=url, token=token, sigv4=sigv4, region=region, environ=environ, cwd=cwd,
                             env_file=env_file)
        base = connection.api_url()
        if sigv4:
            return Target(base, SigV4Auth(connection.signing_region()), f"{base} (SigV4)")
    except UsageError as exc:
        raise TargetError(str(exc)) from None
    if not connection.token:
        raise TargetError(f"no token for {base}: pass --token, set JOBRUNNER_TOKEN, or run `make run` (it writes "
                          f".local/env); for a deployment signed with SigV4, pass --sigv4 or --stage")
    source = "given"
    if connection.env_file and not token:
        found = connection.env_file
        source = f"from {found.relative_to(cwd) if found.is_relative_to(cwd) else found}"
    return Target(base, BearerAuth(connection.token), f"{base} (bearer token {source})")
