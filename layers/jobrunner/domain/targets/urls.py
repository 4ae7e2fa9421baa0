"""The URL of an HTTPS target: the rules it keeps, the address a host names literally, and which redirects
may be followed (``docs/targets.md``, "HTTPS URLs")."""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urljoin, urlsplit

from jobrunner.domain.errors import InvalidField

if TYPE_CHECKING:
    from ipaddress import IPv4Address, IPv6Address

#: The longest URL a target may have, in characters.
MAX_URL = 2048
#: The longest host name (RFC 1035: 253 characters written without the trailing dot).
MAX_HOST = 253
HTTPS_PORT = 443

_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
# A part a resolver's inet_aton takes as a number: decimal, octal (leading 0) or hexadecimal (0x).
_NUMERIC_PART = re.compile(r"(0x[0-9a-f]*|[0-9]+)")
_DOTTED_QUAD = re.compile(r"(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,2})){3}")


def check_https_url(url: str, path: str) -> SplitResult:
    """``url`` split, if it is an absolute https URL a delivery may call; else ``InvalidField`` at ``path``.

    Refused: another scheme, no host, user information (credentials belong in headers), a fragment (never sent),
    a port out of range, a host that is neither a DNS name in ASCII (IDNA names written as ``xn--``) nor a
    canonical IP address (``0177.0.0.1``, ``2130706433`` and ``127.1`` name 127.0.0.1 to a resolver: refused,
    so what a reader sees is what is called), or whitespace and control characters anywhere.
    """
    if not isinstance(url, str) or not url:
        raise InvalidField(path, "must be a non-empty string")
    if len(url) > MAX_URL:
        raise InvalidField(path, f"must be at most {MAX_URL} characters")
    if any(ch.isspace() or not ch.isprintable() or not ch.isascii() for ch in url):
        raise InvalidField(path, "must be ASCII without spaces or control characters (percent-encode them)")
    try:
        parts = urlsplit(url)
    except ValueError as error:  # a bracketed host that is no IPv6 address
        raise InvalidField(path, "has an invalid IPv6 address") from error
    if parts.scheme.lower() != "https":
        raise InvalidField(path, "must be an https URL")
    if "@" in parts.netloc:
        raise InvalidField(path, "must not carry user information (user:password@): send credentials in headers")
    if "#" in url:
        raise InvalidField(path, "must not have a fragment (#...)")
    try:
        parts.port  # noqa: B018 - raises ValueError on a port out of range or not a number
    except ValueError as error:
        raise InvalidField(path, "has an invalid port") from error
    if parts.netloc.endswith(":"):
        raise InvalidField(path, "has an empty port")
    check_host(parts.hostname or "", parts.netloc, path)
    return parts


def check_host(host: str, netloc: str, path: str) -> None:
    """``host`` (lower case, brackets removed) is a DNS name or a canonical IP literal; else ``InvalidField``."""
    if not host:
        raise InvalidField(path, "must name a host")
    if netloc.rsplit("@", 1)[-1].startswith("["):
        if "%" in host:
            raise InvalidField(path, "must not name an IPv6 zone")
        try:
            ipaddress.IPv6Address(host)
        except ValueError as error:
            raise InvalidField(path, "has an invalid IPv6 address") from error
        return
    name = host.removesuffix(".")
    labels = name.split(".")
    if _NUMERIC_PART.fullmatch(labels[-1]):
        # A resolver reads a name ending in a number as an IPv4 address, whatever its form.
        if not _DOTTED_QUAD.fullmatch(name) or any(int(part) > 255 for part in labels):
            raise InvalidField(path, "must write an IPv4 address as four decimal numbers (a.b.c.d)")
        return
    if len(name) > MAX_HOST or not all(_LABEL.fullmatch(label) for label in labels):
        raise InvalidField(path, "must name a valid host (letters, digits, hyphens; IDNA names as xn--)")


def literal_address(host: str) -> IPv4Address | IPv6Address | None:
    """The address ``host`` (as ``urlsplit`` gives it: lower case, no brackets) names literally, or None for a
    DNS name: a literal needs no resolution, but its address is checked like a resolved one."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _origin(parts: SplitResult) -> tuple[str, str, int]:
    return parts.scheme.lower(), (parts.hostname or "").removesuffix("."), parts.port or HTTPS_PORT


def followable_redirect(current_url: str, location: str) -> str | None:
    """The absolute URL a redirect from ``current_url`` to ``location`` (relative or absolute) leads to, if a
    delivery may follow it: https, the same host and port, no user information. None otherwise (the delivery
    then fails without retry: the same answer would come again)."""
    try:
        target = urljoin(current_url, location.strip())
        parts = check_https_url(target.split("#", 1)[0], "location")
    except (InvalidField, ValueError):
        return None
    if _origin(parts) != _origin(urlsplit(current_url)):
        return None
    return parts.geturl()
