"""Address safety: a delivery reaches globally reachable addresses only, unless the stage allow-lists others."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.domain.targets.addresses import carried_ipv4, parse_allow_list, refusal
from jobrunner.domain.targets.urls import check_https_url, followable_redirect, literal_address


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("::1", "loopback"),
    ("169.254.169.254", "link-local"),  # EC2 instance metadata
    ("fd00:ec2::254", "unique-local"),  # EC2 instance metadata over IPv6
    ("169.254.170.2", "link-local"),  # ECS task metadata
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.255", "carrier-grade NAT"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("::", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("ff02::1", "multicast"),
    ("255.255.255.255", "broadcast"),
    ("240.0.0.1", "reserved"),
    ("192.0.0.9", "reserved"),
    ("198.18.0.1", "benchmarking"),
    ("192.0.2.1", "documentation"),
    ("2001:db8::1", "documentation"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("fc00::1", "unique-local"),
    ("fec0::1", "site-local"),
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
    ("::ffff:169.254.169.254", "link-local"),
    ("::ffff:10.1.2.3", "private"),
    ("::ffff:0:127.0.0.1", "loopback"),  # IPv4-translated
    ("64:ff9b::127.0.0.1", "loopback"),  # NAT64
    ("64:ff9b::10.0.0.1", "private"),
    ("64:ff9b:1::1", "local-use NAT64"),
    ("2002:7f00:1::1", "loopback"),  # 6to4 carrying 127.0.0.1
    ("2002:a9fe:a9fe::", "link-local"),  # 6to4 carrying 169.254.169.254
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
    ("::127.0.0.1", "not a global unicast"),  # the deprecated IPv4-compatible form
    ("100::1", "not a global unicast"),  # discard-only
    ("2001:2::1", "IETF protocol assignments"),
])
def test_an_address_a_user_might_try_is_refused(address: str, reason: str) -> None:
    refused = refusal(ip_address(address))
    assert refused is not None
    assert reason in refused


@pytest.mark.parametrize("address", [
    "8.8.8.8", "1.1.1.1", "93.184.215.14", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
    "192.167.255.255", "223.255.255.255", "2606:4700:4700::1111", "2a00:1450:4007:80e::200e",
    "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1",
])
def test_a_globally_reachable_address_is_allowed(address: str) -> None:
    assert refusal(ip_address(address)) is None


def test_the_allow_list_admits_what_it_contains_and_nothing_else() -> None:
    allowed = parse_allow_list(["127.0.0.1/32", "10.20.0.0/16", "fd00:1::/64"])
    assert refusal(ip_address("127.0.0.1"), allowed) is None
    assert refusal(ip_address("10.20.3.4"), allowed) is None
    assert refusal(ip_address("fd00:1::5"), allowed) is None
    assert refusal(ip_address("::ffff:10.20.3.4"), allowed) is None  # the carried address is allow-listed
    assert refusal(ip_address("127.0.0.2"), allowed) == "a loopback address"
    assert refusal(ip_address("10.21.0.1"), allowed) == "a private address"
    assert refusal(ip_address("169.254.169.254"), allowed) is not None
    assert refusal(ip_address("::1"), allowed) is not None  # an IPv4 network admits no IPv6 loopback


@pytest.mark.parametrize("cidr", ["10.0.0.0/33", "10.0.0.1/8", "localhost", ""])
def test_a_bad_allow_list_entry_is_named(cidr: str) -> None:
    with pytest.raises(ValueError, match="CIDR"):
        parse_allow_list([cidr])


def test_carried_ipv4_reads_each_embedding() -> None:
    assert carried_ipv4(IPv6Address("::ffff:1.2.3.4")) == IPv4Address("1.2.3.4")
    assert carried_ipv4(IPv6Address("::ffff:0:1.2.3.4")) == IPv4Address("1.2.3.4")
    assert carried_ipv4(IPv6Address("64:ff9b::1.2.3.4")) == IPv4Address("1.2.3.4")
    assert carried_ipv4(IPv6Address("2002:102:304:5::6")) == IPv4Address("1.2.3.4")
    assert carried_ipv4(IPv6Address("2606:4700::1")) is None


@given(st.integers(0, 2**32 - 1))
def test_a_mapped_address_is_judged_as_the_ipv4_it_carries(value: int) -> None:
    v4 = IPv4Address(value)
    mapped = IPv6Address(f"::ffff:{v4}")
    assert (refusal(mapped) is None) == (refusal(v4) is None)


@given(st.integers(0, 2**32 - 1))
def test_every_ipv4_the_standard_library_calls_private_is_refused(value: int) -> None:
    address = IPv4Address(value)
    if address.is_private or address.is_loopback or address.is_link_local or address.is_multicast \
            or address.is_reserved or address.is_unspecified:
        assert refusal(address) is not None


@pytest.mark.parametrize(("host", "address"), [
    ("127.0.0.1", "127.0.0.1"), ("::1", "::1"), ("::ffff:7f00:1", "::ffff:127.0.0.1"), ("example.com", None),
])
def test_a_literal_host_names_its_address(host: str, address: str | None) -> None:
    assert literal_address(host) == (ip_address(address) if address else None)


@pytest.mark.parametrize("url", ["https://[::]/", "https://0.0.0.0/", "https://[::ffff:127.0.0.1]/"])
def test_a_literal_url_host_is_checked_like_a_resolved_address(url: str) -> None:
    # Given a URL whose host is an address, when its literal is read, then the address rules refuse it
    address = literal_address(check_https_url(url, "url").hostname or "")
    assert address is not None
    assert refusal(address) is not None


@pytest.mark.parametrize(("location", "followed"), [
    ("/next", "https://hooks.example.com/next"),
    ("next?x=1", "https://hooks.example.com/a/next?x=1"),
    ("https://HOOKS.example.com/b", "https://HOOKS.example.com/b"),
    ("https://hooks.example.com./b", "https://hooks.example.com./b"),
    ("https://hooks.example.com:443/b", "https://hooks.example.com:443/b"),
    ("/b#frag", "https://hooks.example.com/b"),
    ("http://hooks.example.com/b", None),  # no downgrade
    ("https://other.example.com/b", None),  # another host
    ("//other.example.com/b", None),
    ("https://hooks.example.com:8443/b", None),  # another port
    ("https://user@hooks.example.com/b", None),
    ("https://169.254.169.254/latest/meta-data/", None),
    ("https://[::1]/", None),
    ("https://hooks.example.com.evil.example/b", None),
])
def test_a_redirect_is_followed_to_the_same_host_and_port_only(location: str, followed: str | None) -> None:
    assert followable_redirect("https://hooks.example.com/a/b", location) == followed


def test_a_redirect_keeps_an_explicit_port() -> None:
    assert followable_redirect("https://h.example:8443/a", "/b") == "https://h.example:8443/b"
    assert followable_redirect("https://h.example:8443/a", "https://h.example/b") is None


def test_the_allow_list_networks_are_typed() -> None:
    assert parse_allow_list([" 10.0.0.0/8 ", "::1/128"]) == (ip_network("10.0.0.0/8"), ip_network("::1/128"))
