"""Which addresses a delivery may connect to (server-side request forgery, ``docs/targets.md``, "Addresses").

A delivery connects only to a globally reachable unicast address, checked after resolution, at connect time,
so a DNS name that resolves to a private address is refused like the literal. An IPv6 address that carries an
IPv4 one for a translator or tunnel (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-translated ``::ffff:0:a.b.c.d``,
NAT64 ``64:ff9b::a.b.c.d``, 6to4 ``2002:AABB:CCDD::``) is judged by that IPv4 address; Teredo (``2001::/32``)
is refused outright, its client address being obfuscated and its path a relay. A stage's allow-list of
networks (a VPC's endpoints, a test receiver on 127.0.0.1) admits the addresses, or carried IPv4 addresses,
it contains.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network


def _table(rows: Iterable[tuple[str, str]]) -> tuple[tuple[Network, str], ...]:
    return tuple((ip_network(cidr), reason) for cidr, reason in rows)


#: IPv4 networks no delivery reaches (the IANA special-purpose registry), with the reason a refusal gives.
REFUSED_V4 = _table((
    ("0.0.0.0/8", "an unspecified address (this network)"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a shared address (carrier-grade NAT)"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address (instance metadata)"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "a reserved address (IETF protocol assignments)"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "a reserved address (6to4 relay anycast)"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a reserved address (benchmarking)"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address (including broadcast)"),
))
#: IPv6 networks refused inside global unicast (2000::/3); any address outside it is refused as well.
REFUSED_V6 = _table((
    ("2001::/32", "a Teredo tunnel address"),
    ("2001::/23", "a reserved address (IETF protocol assignments)"),
    ("2001:db8::/32", "a documentation address"),
    ("3fff::/20", "a documentation address"),
))
_GLOBAL_V6 = IPv6Network("2000::/3")
_OUTSIDE_GLOBAL_V6 = _table((
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("64:ff9b:1::/48", "a private address (local-use NAT64)"),
    ("fc00::/7", "a unique-local address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
))
_MAPPED = IPv6Network("::ffff:0:0/96")
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = IPv6Network("2002::/16")


def carried_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address ``address`` carries for a translator or 6to4 tunnel (module docstring), or None."""
    if address in _MAPPED or address in _TRANSLATED or address in _NAT64:
        return IPv4Address(int(address) & 0xFFFF_FFFF)
    if address in _SIX_TO_FOUR:
        return IPv4Address((int(address) >> 80) & 0xFFFF_FFFF)
    return None


def _refused_v4(address: IPv4Address) -> str | None:
    return next((reason for network, reason in REFUSED_V4 if address in network), None)


def _refused_v6(address: IPv6Address) -> str | None:
    if address not in _GLOBAL_V6:
        named = next((reason for network, reason in _OUTSIDE_GLOBAL_V6 if address in network), None)
        return named or "not a global unicast address"
    return next((reason for network, reason in REFUSED_V6 if address in network), None)


def refusal(address: Address, allowed: Iterable[Network] = ()) -> str | None:
    """Why a delivery may not connect to ``address`` ("a loopback address"), or None if it may: the address
    is globally reachable, or it (or the IPv4 address it carries) is in one of the ``allowed`` networks."""
    carried = carried_ipv4(address) if isinstance(address, IPv6Address) else None
    if isinstance(address, IPv6Address) and address.scope_id:
        address = IPv6Address(address.compressed.split("%", 1)[0])
    allowed = tuple(allowed)
    if any(candidate in network for candidate in (address, carried) if candidate is not None
           for network in allowed if candidate.version == network.version):
        return None
    if carried is not None:
        reason = _refused_v4(carried)
        return f"{reason} (carried in {address})" if reason else None
    return _refused_v4(address) if isinstance(address, IPv4Address) else _refused_v6(address)


def parse_allow_list(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """A stage's allow-list from its CIDR strings (``10.0.0.0/8``, ``::1/128``); ``ValueError`` names a bad one
    (a setting, checked when the stage's settings are read, not a user's field)."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ip_network(cidr.strip(), strict=True))
        except ValueError as error:
            raise ValueError(f"not a network in CIDR notation: {cidr!r} ({error})") from error
    return tuple(networks)
