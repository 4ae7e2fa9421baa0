"""The time budget of the AWS clients: the longest one call can wait fits inside the function's own timeout.

A call's worst case, from the client's own configuration (botocore's, after it merged what it was given) in
botocore's standard retry mode: every attempt waits the connect timeout on each address the service's name
resolves to (an interface endpoint has one per subnet, and a dropped SYN is retried on the next address with
the full timeout: urllib3's ``create_connection``), then the read timeout; between attempts, the longest
backoff (a throttling error's, capped) plus the most an ``x-amz-retry-after`` header may add. The function's
timeout is the template's. Issue #32: botocore's 60 s connect and read, five retries on two addresses, left
the API answering 504 after its write had landed, and a scan stalled past its lease.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from botocore.retries.standard import ExponentialBackoff

from tests.infra.conftest import VARIANTS
from tests.infra.test_network_paths import JOBRUNNER_FUNCTIONS, Network, _ref, clients_of, functions

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.infra.conftest import Synthesized

#: The longest sleep before retry ``i`` (0-based): a throttling error's full jitter, capped, plus a retry-after.
_LONGEST_BACKOFF_S = [
    min(ExponentialBackoff._DEFAULT_BACKOFF_CONFIG["throttling_base_scale"] * ExponentialBackoff._BASE ** i,
        ExponentialBackoff._MAX_BACKOFF) + ExponentialBackoff._RETRY_AFTER_MAX_ADDITIONAL
    for i in range(10)
]


def worst_case_s(config: Any, addresses: int) -> float:
    """The longest one call of a client with ``config`` can take, its service's name resolving to ``addresses``."""
    retries = config.retries
    assert retries.get("mode") == "standard", f"retry mode {retries.get('mode')}: give the client a budget"
    attempts = int(retries["total_max_attempts"])
    per_attempt = addresses * float(config.connect_timeout) + float(config.read_timeout)
    return attempts * per_attempt + float(sum(_LONGEST_BACKOFF_S[: attempts - 1]))


def addresses(app: Synthesized, function: dict[str, Any], service: str) -> int:
    """How many addresses the service's name gives the function: its interface endpoint's subnets, else one."""
    vpc_config = function.get("VpcConfig")
    if vpc_config is None:
        return 1
    network = Network(app)
    (vpc,) = {network.vpc_of_subnet[_ref(s)] for s in vpc_config["SubnetIds"]}
    interface = [e for e in network.endpoints(service, vpc) if e.get("VpcEndpointType") == "Interface"]
    return max((len(e["SubnetIds"]) for e in interface), default=1)


def test_the_worst_case_counts_every_address_every_attempt_and_the_longest_backoffs() -> None:
    # botocore's defaults in standard mode, two addresses: 5 attempts of 60 s + 60 s + 60 s, then sleeps of
    # at most 1+5, 2+5, 4+5 and 8+5 s
    import boto3
    from botocore.config import Config

    config = boto3.client("lambda", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(retries={"mode": "standard", "max_attempts": 4})).meta.config
    assert worst_case_s(config, 2) == 5 * 180 + (1 + 2 + 4 + 8) + 4 * 5


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", JOBRUNNER_FUNCTIONS)
def test_one_call_of_every_aws_client_a_function_creates_ends_within_its_timeout(
    synth: Callable[[str], Synthesized], monkeypatch: pytest.MonkeyPatch, variant: str, name: str,
) -> None:
    # Given the function's timeout and the clients its container creates, with its environment from the template
    app = synth(variant)
    function = functions(app)[name]
    timeout_s = int(function["Timeout"])
    clients = clients_of(name, function, monkeypatch)
    assert clients
    # When each call times out on every address, every attempt, after the longest backoffs
    worst = {client.service: worst_case_s(client.config, addresses(app, function, client.service))
             for client in clients}
    # Then it still ends before the function is stopped, with the time to say why
    assert {service: seconds for service, seconds in worst.items() if seconds > timeout_s} == {}, (
        f"{name}: timeout {timeout_s} s, worst cases {worst}")
