"""The context's composite values: an existing Cassandra cluster, other VPCs reaching Kafka, a provisioned MSK
cluster, a custom domain, the targets a stage allows, and the VPC's zones. Each is a frozen pydantic dataclass
that checks its own fields."""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Any

from pydantic import ConfigDict, field_validator, model_validator
from pydantic.dataclasses import dataclass
from pydantic_core import ArgsKwargs

from infra.config.types import Flag, an_object, matching, names, whole

_PART = ConfigDict(extra="forbid")


def _shaped(value: Any, part: type, example: str) -> Any:
    """A part given as an object holds its own keys only (one built in code is checked field by field)."""
    if isinstance(value, ArgsKwargs | part):
        return value
    return an_object(value, tuple(field.name for field in dataclasses.fields(part)), example)

#: Region -> the two zones the VPC uses by default, by zone ID. A zone *name* (us-east-1a) maps to a
#: different physical zone in each account, so "the region's first two" differ from account to account;
#: an ID names the same zone everywhere, and services list the zones they support by ID. Each pair keeps
#: to the region's long-established zones and avoids those known to be refused or closed to new accounts
#: (use1-az3, usw1-az2, apne1-az3). It is a judgement, not an AWS table: ``make preflight`` checks the
#: Keyspaces endpoint is offered in both zones, and the ``availability_zones`` context key overrides it.
ZONE_IDS: dict[str, tuple[str, str]] = {
    "us-east-1": ("use1-az1", "use1-az2"),
    "us-east-2": ("use2-az1", "use2-az2"),
    "us-west-1": ("usw1-az1", "usw1-az3"),
    "us-west-2": ("usw2-az1", "usw2-az2"),
    "ca-central-1": ("cac1-az1", "cac1-az2"),
    "eu-west-1": ("euw1-az1", "euw1-az2"),
    "eu-west-2": ("euw2-az1", "euw2-az2"),
    "eu-west-3": ("euw3-az1", "euw3-az2"),
    "eu-central-1": ("euc1-az1", "euc1-az2"),
    "eu-north-1": ("eun1-az1", "eun1-az2"),
    "ap-northeast-1": ("apne1-az1", "apne1-az4"),
    "ap-northeast-2": ("apne2-az1", "apne2-az3"),
    "ap-southeast-1": ("apse1-az1", "apse1-az2"),
    "ap-southeast-2": ("apse2-az1", "apse2-az2"),
    "ap-south-1": ("aps1-az1", "aps1-az3"),
    "sa-east-1": ("sae1-az1", "sae1-az3"),
}
_ZONE_ID = re.compile(r"^[a-z]{2,}[0-9]+-az[0-9]+$")
_ZONE_NAME = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$")


def is_zone_id(zone: str) -> bool:
    """``use1-az1`` (a zone ID, the same physical zone in every account), not ``us-east-1a`` (a name)."""
    return bool(_ZONE_ID.match(zone))


def zones(value: tuple[str, ...]) -> tuple[str, ...]:
    """Two or more different zones, all by ID or all by name; empty: the two ``ZONE_IDS`` lists for the region."""
    if not value:
        return ()
    if len(value) < 2 or len(set(value)) != len(value):
        raise ValueError(f"expected two or more different zones, got {list(value)!r}")
    if not (all(_ZONE_ID.match(z) for z in value) or all(_ZONE_NAME.match(z) for z in value)):
        raise ValueError(f"expected all zone IDs (use1-az1) or all zone names (us-east-1a), got {list(value)!r}")
    return value


@dataclass(frozen=True, config=_PART)
class ExistingCassandra:
    """A Cassandra cluster the functions reach from the VPC (peering, Transit Gateway...); its contact points,
    port and secret are runtime settings, checked by ``Settings`` (``infra.config.runtime``)."""

    contact_points: tuple[str, ...]
    port: int = 9042
    secret_arn: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        return _shaped(value, cls, '{"contact_points": ["10.0.0.10"], "port": 9042, "secret_arn": "arn:aws:..."}')

    @field_validator("contact_points")
    @classmethod
    def _some(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("expected a non-empty list of hosts")
        return value

    @field_validator("secret_arn")
    @classmethod
    def _arn(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("arn:"):
            raise ValueError(f"expected a Secrets Manager ARN, got {value!r}")
        return value


_SUBNETS = names("subnet-... ids", accepts=lambda s: s.startswith("subnet-"))
_GROUPS = names("sg-... ids", accepts=lambda s: s.startswith("sg-"))


@dataclass(frozen=True, config=_PART)
class KafkaClientVpc:
    """A VPC of the user's whose clients reach the MSK Serverless cluster (the cluster gets endpoints there)."""

    subnet_ids: Annotated[tuple[str, ...], _SUBNETS]
    security_group_ids: Annotated[tuple[str, ...], _GROUPS] = ()

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        return _shaped(value, cls, '{"subnet_ids": ["subnet-..."], "security_group_ids": ["sg-..."]}')

    @field_validator("subnet_ids")
    @classmethod
    def _zones(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) < 2:
            raise ValueError(f"needs two or more subnet-... ids in different zones, got {list(value)!r}")
        return value


#: MSK's bounds of a Standard broker's EBS storage, in GiB (its quota page).
STORAGE_GIB = (1, 16384)


@dataclass(frozen=True, config=_PART)
class ProvisionedKafka:
    """The brokers of a provisioned MSK cluster (Standard brokers, EBS storage), used instead of MSK Serverless."""

    instance_type: Annotated[str, matching(r"^kafka\.[a-z0-9]+\.[a-z0-9]+$", "an MSK Standard broker type such as "
                                                                          "kafka.t3.small or kafka.m7g.large")] = (
        "kafka.t3.small")
    brokers_per_zone: Annotated[int, whole(1, 10)] = 1
    storage_gib: Annotated[int, whole(*STORAGE_GIB)] = 10
    #: MSK's recommended version when this was written (its "Supported Apache Kafka versions" page).
    kafka_version: Annotated[str, matching(r"^[0-9]+\.[0-9]+\.([0-9]+|x)(\.[a-z]+)?$",
                                           "an MSK version such as 3.8.x or 3.6.0")] = "3.8.x"

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        return _shaped(value, cls, '{"instance_type": "kafka.t3.small", "brokers_per_zone": 1}')


_DOMAIN = r"^(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$"
_CERTIFICATE = r"^arn:aws[a-z-]*:acm:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:certificate/[0-9a-f-]{36}$"


@dataclass(frozen=True, config=_PART)
class CustomDomain:
    """A domain name of the user's and the ACM certificate that covers it (the DNS record is the user's to make)."""

    domain_name: Annotated[str, matching(_DOMAIN, "a lowercase domain name such as jobs.example.com")]
    certificate_arn: Annotated[str, matching(_CERTIFICATE, "an ACM certificate ARN")]

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        if isinstance(value, ArgsKwargs | CustomDomain):
            return value
        if not isinstance(value, dict) or set(value) != {"domain_name", "certificate_arn"}:
            raise ValueError(f"expected null or {{\"domain_name\": \"jobs.example.com\", \"certificate_arn\": "
                             f"\"arn:aws:acm:...\"}}, got {value!r}")
        return value

    @property
    def certificate_region(self) -> str:
        return self.certificate_arn.split(":")[3]


#: A ``targets`` value, shown when one is refused for its shape.
TARGETS_EXAMPLE = '{"kinds": ["https", "lambda"], "lambda_allow": ["123456789012"], "sqs_allow": []}'


@dataclass(frozen=True, config=_PART)
class Targets:
    """The targets a stage lets jobs name (issue 35), and so deploys the delivery function for. The kinds and the
    allow-lists are runtime settings, checked by ``Settings`` (``infra.config.runtime.TARGETS``); the delivery
    function's IAM grants are derived from the allow-lists (``infra.constructs.delivery``).

    A ``*`` in ``lambda_allow`` or ``sqs_allow`` would grant the delivery function every function (or queue) of
    every account that trusts it: refused unless the stage says ``allow_any: true`` as well, so that a stage
    reaching anyone's functions does so in writing, not by a copied example.
    """

    kinds: Annotated[tuple[str, ...], names("kinds of target (https, lambda, sqs)")]
    lambda_allow: Annotated[tuple[str, ...], names("function ARNs or account ids")] = ()
    sqs_allow: Annotated[tuple[str, ...], names("queue URLs or account ids")] = ()
    address_allow: Annotated[tuple[str, ...], names("networks (CIDRs)")] = ()
    allow_any: Flag = False

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        return _shaped(value, cls, TARGETS_EXAMPLE)

    @field_validator("kinds")
    @classmethod
    def _some(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or "none" in value:
            raise ValueError("expected one or more of https, lambda, sqs (for none, set targets to null)")
        return value

    @model_validator(mode="after")
    def _any_in_writing(self) -> Targets:
        for key in ("lambda_allow", "sqs_allow"):
            if "*" in getattr(self, key) and not self.allow_any:
                raise ValueError(f"{key} holds *: the delivery function could reach every account's "
                                 f"{'functions' if key == 'lambda_allow' else 'queues'} that admit it; list the "
                                 f"accounts or ARNs, or add \"allow_any\": true to say so")
        return self

    @property
    def https(self) -> bool:
        """HTTPS targets allowed: the delivery function needs the internet (a NAT gateway)."""
        return "https" in self.kinds
