"""Checks the account before ``cdk deploy``: ``python -m infra.preflight [-c key=value ...]`` (``make deploy``
runs it with ``CDK_ARGS``). Needs AWS credentials; reads the same context as the app (``cdk.json`` and ``-c``).

Lambda's "Concurrent executions" quota (Service Quotas code ``L-B99A9384``) can be as low as 10 on a new
account, and Lambda refuses a reservation that would leave fewer than 100 unreserved: the scan function's
reservation then fails the deploy, and its scans (about two per segment at once) would be throttled anyway.
The zones the VPC will use (``ZONE_IDS`` for the region, or ``availability_zones``) must exist in the
account and offer the Keyspaces VPC endpoint (``com.amazonaws.<region>.cassandra``); else CloudFormation
fails half-way, after the VPC and the cluster. The stage's keyspace must not exist unless it is the stack's or
adopted (``adopt_keyspace``): ``retain_data`` keeps it, under its fixed name, when a stack is destroyed. An
account without any CloudFront distribution may not be verified for CloudFront yet, which then refuses the web
dashboard's (after the cluster). A stage's alarms need a subscriber (``alarm_email``; the config refuses a stage
other than dev without one). dev's API admits every principal of the deploying account (``api_principals``
empty; the config requires a list of every other stage): a warning says so. A custom domain's certificate
(``api_domain``, ``dashboard_domain``) must be issued and cover the name, else CloudFormation fails on it after the
cluster. Each finding says how to fix it. Exit status 1 when the deploy would fail (a
reservation the account cannot hold, a zone it cannot use, a keyspace in the way); a quota too low for the
segments, an account that may not be verified for CloudFront, or dev's alarms reaching nobody only warn.

Every call reads: ``lambda:GetAccountSettings`` and ``GetFunctionConcurrency``, ``ec2:DescribeAvailabilityZones``
and ``DescribeVpcEndpointServices``, ``cloudfront:ListDistributions``, the Keyspaces API's ``GetKeyspace`` and
``ListTables``, ``cloudformation:ListStackResources``, ``sts:GetCallerIdentity``, ``acm:DescribeCertificate`` (a
custom domain's). Tests inject the clients.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cql.schema import load_tables
from infra.config import ZONE_IDS, ConfigError, DeploymentConfig, cli_context, is_zone_id, scan_concurrency
from infra.layer_build import ROOT

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from infra.config import CustomDomain

QUOTA_CODE = "L-B99A9384"
QUOTA_NAME = "Concurrent executions"
#: Lambda keeps at least this much of the account's concurrency unreserved.
UNRESERVED_FLOOR = 100
#: Concurrency of the other functions at their busiest: tick, api, results, and a little for retries (the delivery
#: function, on a stage with targets, is counted apart: ``delivery_concurrency``).
OTHER_FUNCTIONS = 6


@dataclass(frozen=True)
class Finding:
    #: The deploy would fail (else: it would work, but slowly).
    blocking: bool
    text: str


@dataclass(frozen=True)
class AccountConcurrency:
    limit: int
    unreserved: int
    #: What the stack's scan function reserves already (a redeploy), counted in neither figure above.
    own_reservation: int = 0


def delivery_concurrency(config: DeploymentConfig) -> int:
    """The delivery function's concurrent executions at its busiest: one per partition of ``job-deliveries`` (Lambda
    hands a partition's batches to one invocation at a time); none on a stage without targets (no such function)."""
    return 0 if config.targets is None else config.kafka_partitions


def needed_concurrency(config: DeploymentConfig) -> int:
    """Concurrent executions the stack may use at once: its scans at a minute edge, plus the other functions."""
    return scan_concurrency(config.segments) + OTHER_FUNCTIONS + delivery_concurrency(config)


def problems(config: DeploymentConfig, account: AccountConcurrency, region: str) -> list[Finding]:
    raise_it = (f"raise it: aws service-quotas request-service-quota-increase --region {region} "
                f"--service-code lambda --quota-code {QUOTA_CODE} --desired-value 1000")
    found = []
    reserved = config.scan_reserved_concurrency or 0
    left = account.unreserved + account.own_reservation - reserved
    if reserved and left < UNRESERVED_FLOOR:
        found.append(Finding(True,
            f"scan_reserved_concurrency={reserved} would leave {left} of the account's {account.limit} "
            f"'{QUOTA_NAME}' unreserved in {region}; Lambda keeps at least {UNRESERVED_FLOOR} unreserved, so the "
            f"deploy would fail. Either {raise_it}, or deploy with -c scan_reserved_concurrency=0 (no reservation)."
        ))
    needed = needed_concurrency(config)
    if account.limit < needed:
        found.append(Finding(False,
            f"'{QUOTA_NAME}' (Service Quotas {QUOTA_CODE}) is {account.limit} in {region}; {config.segments} segments "
            f"need about {needed} at once, so scans would be throttled and run late. Either {raise_it}, or deploy "
            f"with fewer segments (-c segments=N needs about 2N + {needed - 2 * config.segments})."
        ))
    return found


def environment_problems(config: DeploymentConfig, account_id: str | None, region: str) -> list[Finding]:
    """A stage pinned in ``stages`` checked against where the credentials would deploy."""
    found = []
    if config.account is not None and account_id is not None and account_id != config.account:
        found.append(Finding(True,
            f"stage {config.stage} deploys to account {config.account} (stages.{config.stage}.account), but the "
            f"credentials are for {account_id}: use a profile of that account (AWS_PROFILE=...)."))
    if config.region is not None and region != config.region:
        found.append(Finding(True,
            f"stage {config.stage} deploys to {config.region} (stages.{config.stage}.region), but the checks would "
            f"run in {region}."))
    return found


def subscriber_problems(config: DeploymentConfig) -> list[Finding]:
    """Alarms without a subscriber reach nobody. Other stages cannot get here without one (the config refuses)."""
    if config.alarm_email:
        return []
    return [Finding(False, f"stage {config.stage} has no alarm_email: its alarms notify a topic nobody reads. "
                           f"Deploy with -c alarm_email=<you@example.com> (and confirm the email AWS sends).")]


def admission_problems(config: DeploymentConfig, account_id: str | None) -> list[Finding]:
    """dev without ``api_principals`` admits the deploying account: every principal there that its IAM policies let
    invoke the API is a tenant of its own. Other stages cannot get here without a list (the config refuses)."""
    if config.api_auth != "iam" or config.api_principals:
        return []
    return [Finding(False,
        f"stage {config.stage} admits every principal of account {account_id or '<the deploying account>'} whose IAM "
        f"policies allow execute-api:Invoke, each a tenant of its own; to admit fewer, list them: -c "
        f"'api_principals=[\"arn:aws:iam::<account>:role/<name>\"]' (or stages.{config.stage}.api_principals in "
        f"cdk.json; docs/deploy.md, 'Admitting tenants').")]


def domains(config: DeploymentConfig) -> dict[str, CustomDomain]:
    """The stage's custom domains by the key that sets them."""
    named = {"api_domain": config.api_domain, "dashboard_domain": config.dashboard_domain}
    return {key: domain for key, domain in named.items() if domain is not None}


def certificate_problems(config: DeploymentConfig, certificates: Mapping[str, Mapping[str, Any] | None],
                         region: str | None = None) -> list[Finding]:
    """``certificates``: ACM's ``DescribeCertificate`` of each domain's certificate (None: not found); ``region``:
    where the stack deploys. A certificate not issued, not covering its domain, or (the API's) in another region
    than the stack fails the deploy on the domain (after the cluster)."""
    found = []
    api = config.api_domain
    if api is not None and region is not None and api.certificate_region != region:
        found.append(Finding(True, f"api_domain.certificate_arn is in {api.certificate_region}, but the stack deploys "
                                   f"to {region}: a regional API takes a certificate of its own region; request one "
                                   f"there."))
    for key, domain in domains(config).items():
        certificate = certificates.get(domain.certificate_arn)
        where = f"{key}.certificate_arn ({domain.certificate_arn})"
        if certificate is None:
            found.append(Finding(True, f"{where}: no such certificate in {domain.certificate_region}; request one "
                                       f"for {domain.domain_name} there (aws acm request-certificate --region "
                                       f"{domain.certificate_region} --domain-name {domain.domain_name} "
                                       f"--validation-method DNS) and validate it."))
            continue
        if certificate.get("Status") != "ISSUED":
            found.append(Finding(True, f"{where} is {certificate.get('Status')}, not ISSUED: finish its validation "
                                       f"(aws acm describe-certificate --region {domain.certificate_region} "
                                       f"--certificate-arn {domain.certificate_arn} shows the DNS record it "
                                       f"waits for)."))
        names = [certificate.get("DomainName", ""), *certificate.get("SubjectAlternativeNames", [])]
        if not any(_covers(name, domain.domain_name) for name in names):
            found.append(Finding(True, f"{where} covers {', '.join(n for n in names if n)}, not "
                                       f"{domain.domain_name}: use a certificate for that name."))
    return found


def _covers(name: str, domain: str) -> bool:
    """Whether a certificate's name covers ``domain``: the same name, or a wildcard one level above it."""
    if name.startswith("*."):
        return domain.partition(".")[2] == name[2:]
    return name == domain


def read_certificates(config: DeploymentConfig, acm_client_for: Callable[[str], Any],
                      ) -> dict[str, Mapping[str, Any] | None]:
    """Each custom domain's certificate, from ACM in its region (None when there is no such certificate)."""
    found: dict[str, Mapping[str, Any] | None] = {}
    for domain in domains(config).values():
        client = acm_client_for(domain.certificate_region)
        try:
            found[domain.certificate_arn] = client.describe_certificate(
                CertificateArn=domain.certificate_arn)["Certificate"]
        except client.exceptions.ResourceNotFoundException:
            found[domain.certificate_arn] = None
    return found


def cloudfront_problems(config: DeploymentConfig, *, has_distributions: bool) -> list[Finding]:
    """CloudFront refuses a new account's first distribution until AWS verifies the account ("Your account must be
    verified before you can add new CloudFront resources"), and no API tells whether it has been. An account that
    holds a distribution has been; one that holds none may not be: warn, since the distribution is created after
    the MSK cluster, and its refusal rolls back the longest step of the deploy."""
    if not config.web_dashboard or has_distributions:
        return []
    return [Finding(False,
        "this account holds no CloudFront distribution: if it is new, CloudFront may refuse the web dashboard's "
        "('Your account must be verified before you can add new CloudFront resources'), after the MSK cluster is "
        "created, and the deploy rolls back. Either deploy without it (-c web_dashboard=false -c runbook_url=<the "
        f"https URL of docs/runbooks.md>, or both in stages.{config.stage} in cdk.json) and ask AWS Support to verify "
        "the account, then turn it on again; or go on if the account is known to be verified."
    )]


def read_has_distributions(cloudfront_client: Any) -> bool:
    """Whether the account holds any CloudFront distribution (one read, at most one item)."""
    listing = cloudfront_client.list_distributions(MaxItems="1")["DistributionList"]
    return bool(listing.get("Quantity", 0))


def keyspace_problems(config: DeploymentConfig, *, exists: bool, owned: bool, tables: set[str] | None,
                      wanted: Sequence[str], region: str = "<region>") -> list[Finding]:
    """The stage's keyspace against what the stack would do with it. ``exists``: the keyspace is in the account;
    ``owned``: it is one of the stack's resources; ``tables``: the keyspace's tables (read when it is adopted);
    ``wanted``: the tables of ``cql/``.

    A keyspace's name is fixed, and ``retain_data`` keeps it (and its tables) when the stack is destroyed: a new
    stack of the stage would fail on it with "already exists", after the MSK cluster."""
    name, stage = config.keyspace, config.stage
    if not config.uses_keyspaces:
        return []
    if not config.adopt_keyspace:
        if not exists or owned:
            return []
        return [Finding(True,
            f"keyspace {name} already exists (kept by retain_data when an earlier JobRunner-{stage} was destroyed, "
            f"or made by hand) and is not this stack's: CloudFormation would fail to create it ('already exists'). "
            f"Either use it as it is, with its data: -c adopt_keyspace=true (stages.{stage}.adopt_keyspace in "
            f"cdk.json), the stack then creates neither it nor its tables; or, if its data may go, delete it: "
            f"aws keyspaces delete-keyspace --keyspace-name {name} (then wait until aws keyspaces get-keyspace "
            f"--keyspace-name {name} answers ResourceNotFoundException).")]
    if not exists:
        return [Finding(True, f"adopt_keyspace is set, but there is no keyspace {name} to adopt in this account and "
                              f"region: drop adopt_keyspace, so that the stack creates it.")]
    if owned:
        return [Finding(True, f"adopt_keyspace is set, but keyspace {name} is already the stack's: dropping it from "
                              f"the stack would delete it with retain_data=false. Drop adopt_keyspace.")]
    missing = sorted(set(wanted) - (tables or set()))
    if missing:
        return [Finding(True,
            f"the adopted keyspace {name} lacks tables of cql/: {', '.join(missing)}. Create them (and any missing "
            f"columns) with the stack's settings: CASSANDRA_MODE=keyspaces CASSANDRA_CONTACT_POINTS=cassandra."
            f"{region}.amazonaws.com CASSANDRA_PORT=9142 CASSANDRA_KEYSPACE={name} python -m cql.migrate "
            f"(docs/deploy.md, 'Redeploying after cdk destroy').")]
    return []


def read_keyspace(keyspaces_client: Any, cloudformation_client: Any, config: DeploymentConfig,
                  ) -> tuple[bool, bool, set[str] | None]:
    """Whether the stage's keyspace exists, whether the stack holds it, and (when it is adopted) its tables."""
    try:
        keyspaces_client.get_keyspace(keyspaceName=config.keyspace)
    except keyspaces_client.exceptions.ResourceNotFoundException:
        return False, False, None
    owned = config.keyspace in _stack_resources(cloudformation_client, config.stack_name, "AWS::Cassandra::Keyspace")
    if not config.adopt_keyspace:
        return True, owned, None
    tables: set[str] = set()
    token: dict[str, str] = {}
    while True:
        page = keyspaces_client.list_tables(keyspaceName=config.keyspace, **token)
        tables |= {t["tableName"] for t in page.get("tables", [])}
        if not page.get("nextToken"):
            return True, owned, tables
        token = {"nextToken": page["nextToken"]}


def _stack_resources(cloudformation_client: Any, stack_name: str, resource_type: str) -> set[str]:
    """The physical ids of the stack's resources of that type; none when the stack does not exist."""
    found: set[str] = set()
    token: dict[str, str] = {}
    while True:
        try:
            page = cloudformation_client.list_stack_resources(StackName=stack_name, **token)
        except cloudformation_client.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] == "ValidationError":  # "Stack with id ... does not exist"
                return found
            raise
        found |= {r.get("PhysicalResourceId", "") for r in page["StackResourceSummaries"]
                  if r["ResourceType"] == resource_type}
        if not page.get("NextToken"):
            return found
        token = {"NextToken": page["NextToken"]}


def zone_problems(config: DeploymentConfig, region: str, zone_ids: dict[str, str],
                  keyspaces_zones: Sequence[str]) -> list[Finding]:
    """``zone_ids``: the account's zone name -> zone ID; ``keyspaces_zones``: names where the endpoint is offered."""
    pin = ("pin others by ID: -c 'availability_zones=[\"<zone id>\",\"<zone id>\"]' "
           "(aws ec2 describe-availability-zones)")
    if config.availability_zones:
        wanted = [z if is_zone_id(z) else zone_ids.get(z, z) for z in config.availability_zones]
    elif region in ZONE_IDS:
        wanted = list(ZONE_IDS[region])
    else:
        return [Finding(True, f"{region} has no default zones in infra/config/parts.py ZONE_IDS; {pin}")]
    found = [Finding(True, f"zone {z} does not exist for this account in {region}; {pin}")
             for z in wanted if z not in zone_ids.values()]
    offered = {zone_ids[name] for name in keyspaces_zones if name in zone_ids}
    if config.uses_keyspaces:
        found += [Finding(True, f"the Keyspaces VPC endpoint is not offered in zone {z} of {region} (it is in "
                                f"{', '.join(sorted(offered)) or 'none'}); {pin}")
                  for z in wanted if z in zone_ids.values() and z not in offered]
    return found


def read_zones(ec2_client: Any, region: str) -> tuple[dict[str, str], list[str]]:
    """The account's zone names -> IDs, and the zone names offering the Keyspaces endpoint."""
    zones = {z["ZoneName"]: z["ZoneId"] for z in ec2_client.describe_availability_zones()["AvailabilityZones"]}
    services = ec2_client.describe_vpc_endpoint_services(
        ServiceNames=[f"com.amazonaws.{region}.cassandra"])["ServiceDetails"]
    return zones, (services[0]["AvailabilityZones"] if services else [])


def read_account(lambda_client: Any, scan_function: str | None = None) -> AccountConcurrency:
    settings = lambda_client.get_account_settings()
    own = 0
    if scan_function:
        try:
            own = lambda_client.get_function_concurrency(FunctionName=scan_function).get(
                "ReservedConcurrentExecutions", 0)
        except lambda_client.exceptions.ResourceNotFoundException:
            own = 0
    return AccountConcurrency(limit=settings["AccountLimit"]["ConcurrentExecutions"],
                              unreserved=settings["AccountLimit"]["UnreservedConcurrentExecutions"],
                              own_reservation=own)


def context_from(argv: Sequence[str]) -> dict[str, Any]:
    """``cdk.json``'s context with ``-c key=value`` arguments applied, as the cdk CLI does."""
    return cli_context(ROOT / "cdk.json", argv)


def main(argv: Sequence[str] | None = None, lambda_client: Any = None, ec2_client: Any = None,
         sts_client: Any = None, cloudfront_client: Any = None, keyspaces_client: Any = None,
         cloudformation_client: Any = None, acm_client_for: Callable[[str], Any] | None = None) -> int:
    """Every client is created when no Lambda one is given, in the stage's pinned region if it has one; a
    test may give only the Lambda one (then the checks whose client it does not give are skipped)."""
    try:
        config = DeploymentConfig.from_context(context_from(sys.argv[1:] if argv is None else argv).get)
    except ConfigError as exc:
        print(f"preflight: error: {exc}", file=sys.stderr)
        return 1
    if lambda_client is None:
        import boto3

        lambda_client = boto3.client("lambda", region_name=config.region)
        ec2_client = ec2_client or boto3.client("ec2", region_name=config.region)
        sts_client = sts_client or boto3.client("sts", region_name=config.region)
        cloudfront_client = cloudfront_client or boto3.client("cloudfront", region_name=config.region)
        keyspaces_client = keyspaces_client or boto3.client("keyspaces", region_name=config.region)
        cloudformation_client = cloudformation_client or boto3.client("cloudformation", region_name=config.region)
        acm_client_for = acm_client_for or (lambda region: boto3.client("acm", region_name=region))
    region = lambda_client.meta.region_name
    account_id = sts_client.get_caller_identity()["Account"] if sts_client is not None else None
    found = (environment_problems(config, account_id, region) + subscriber_problems(config)
             + admission_problems(config, account_id))
    account = read_account(lambda_client)
    found += problems(config, account, region)
    if ec2_client is not None:
        found += zone_problems(config, region, *read_zones(ec2_client, region))
    if cloudfront_client is not None and config.web_dashboard:
        found += cloudfront_problems(config, has_distributions=read_has_distributions(cloudfront_client))
    if keyspaces_client is not None and cloudformation_client is not None and config.uses_keyspaces:
        exists, owned, tables = read_keyspace(keyspaces_client, cloudformation_client, config)
        found += keyspace_problems(config, exists=exists, owned=owned, tables=tables,
                                   wanted=[t.name for t in load_tables()], region=region)
    if acm_client_for is not None:
        found += certificate_problems(config, read_certificates(config, acm_client_for), region)
    for finding in found:
        print(f"preflight: {'error' if finding.blocking else 'warning'}: {finding.text}", file=sys.stderr)
    if not found:
        print(f"preflight: {config.stack_name} fits the account in {region} ('{QUOTA_NAME}' {account.limit}, "
              f"{account.unreserved} unreserved)")
    return 1 if any(f.blocking for f in found) else 0


if __name__ == "__main__":
    sys.exit(main())
