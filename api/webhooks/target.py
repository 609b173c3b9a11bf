"""Where a webhook may go: the address policy, and a transport that sends to the address
it checked.

A target is an ``http(s)`` URL. Its host is resolved once per send and every address it
resolves to must be public (:func:`refusal`), unless the host is listed in
``SRE_JUDGE_WEBHOOK_ALLOW_HOSTS``. :class:`PinnedTransport` then sends the request to the
first checked address itself: the URL's host becomes that address, while the ``Host``
header, TLS SNI and the certificate check keep the name; the connection's peer is
compared with the address before anything is written to it. Nothing resolves the name a
second time, so a name that answers a public address to the check and another one a
moment later (DNS rebinding) never gets a request.

Public means: IPv4 outside every special-purpose block of the IANA registry; IPv6 in
global unicast space (2000::/3) outside its special-purpose blocks. IPv6 forms that
carry an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-translated
``::ffff:0:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) are judged by the IPv4
address they carry; IPv4-compatible ``::a.b.c.d`` (deprecated), local-use NAT64
``64:ff9b:1::/48``, Teredo and the other IETF protocol assignments (``2001::/23``) and
site-local ``fec0::/10`` are refused whatever they carry. The table is ours, not the
running Python's ``is_global`` (whose table differs by version), which is consulted too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from api.service.errors import InvalidRequest

__all__ = [
    "PeerMismatch",
    "PinnedTransport",
    "Target",
    "allowed_hosts",
    "refusal",
    "resolve_target",
    "verify_peer",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network
#: IPv4 special-purpose blocks (IANA), none of them a webhook target
_IPV4_REFUSED: tuple[tuple[_V4, str], ...] = tuple(
    (_V4(net), why)
    for net, why in (
        ("0.0.0.0/8", "this network"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local (cloud metadata among them)"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)
#: IPv6 blocks refused whatever they carry (checked before the global unicast rule)
_IPV6_REFUSED: tuple[tuple[_V6, str], ...] = tuple(
    (_V6(net), why)
    for net, why in (
        ("::/96", "IPv4-compatible (deprecated), unspecified or loopback"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/23", "IETF protocol assignments (Teredo among them)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing"),
        ("fc00::/7", "unique local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)
_GLOBAL_UNICAST = _V6("2000::/3")
_MAPPED = _V6("::ffff:0:0/96")
_TRANSLATED = _V6("::ffff:0:0:0/96")
_NAT64 = _V6("64:ff9b::/96")
_SIX_TO_FOUR = _V6("2002::/16")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 transition form carries, and the form's name."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _MAPPED:
        return low32, "IPv4-mapped"
    if ip in _TRANSLATED:
        return low32, "IPv4-translated"
    if ip in _NAT64:
        return low32, "NAT64"
    if ip in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF), "6to4"
    return None


def refusal(address: str | IPAddress) -> str | None:
    """Why ``address`` is not a public webhook target (a few words), or None when it is."""
    ip = ipaddress.ip_address(address.split("%", 1)[0] if isinstance(address, str) else address)
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            carried, form = embedded
            why = refusal(carried)
            return None if why is None else f"{form} form of {carried}, {why}"
        for network, why in _IPV6_REFUSED:
            if ip in network:
                return why
        if ip not in _GLOBAL_UNICAST:
            return "outside global unicast space"
    else:
        for network4, why in _IPV4_REFUSED:
            if ip in network4:
                return why
    return None if ip.is_global else "not globally reachable"


def allowed_hosts(setting: str) -> frozenset[str]:
    """The hosts of ``SRE_JUDGE_WEBHOOK_ALLOW_HOSTS``, lower case."""
    return frozenset(h.strip().lower() for h in setting.split(",") if h.strip())


@dataclass(frozen=True)
class Target:
    """A webhook URL's host, resolved once: the addresses that were checked."""

    host: str
    port: int
    #: every address the host resolved to, in the resolver's order; the first is used
    addresses: tuple[str, ...]

    @property
    def pinned(self) -> str:
        """The address a request to this target connects to."""
        return self.addresses[0]


async def resolve_target(url: str, allow: frozenset[str]) -> Target:
    """Resolve the URL's host once and check every address it resolves to.

    Raises :class:`InvalidRequest` (field ``url``) for a URL that holds a blank or a
    control character, is not http(s), has a host that does not resolve, or one that
    resolves to any address that is not public (unless the host is in ``allow``).
    """
    if any(c.isspace() or not c.isprintable() for c in url):
        # the sender percent-encodes a blank and sends it, but a credential holding one
        # would escape its masking in the endpoint list and the audit log
        raise InvalidRequest(
            "a URL holds no blank or control character: percent-encode it", field="url"
        )
    try:
        parts = urlsplit(url)
    except ValueError as error:  # an unclosed IPv6 bracket
        raise InvalidRequest(f"not a URL ({error})", field="url") from error
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise InvalidRequest("an http:// or https:// URL with a host is needed", field="url")
    try:  # what the sender parses: a URL it would refuse on every send is refused now
        httpx.URL(url)
    except httpx.InvalidURL as error:
        raise InvalidRequest(f"not a URL the sender can use ({error})", field="url") from None
    host = parts.hostname.lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError) as error:
        raise InvalidRequest(
            f"the host {host!r} does not resolve ({error})", field="url"
        ) from error
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise InvalidRequest(f"the host {host!r} does not resolve", field="url")
    if host not in allow:
        refused = [f"{a} ({why})" for a in addresses if (why := refusal(a)) is not None]
        if refused:
            raise InvalidRequest(
                f"the host {host!r} resolves to an address that is not public: "
                f"{', '.join(refused)}; list it in SRE_JUDGE_WEBHOOK_ALLOW_HOSTS to allow it",
                field="url",
            )
    return Target(host=host, port=port, addresses=addresses)


class PeerMismatch(httpx.TransportError):
    """The connection reached another address than the one that was checked."""


def verify_peer(pinned: str) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
    """An httpcore ``trace`` hook that closes and refuses a new connection whose peer is
    not ``pinned``, before the request is written to it."""
    expected = ipaddress.ip_address(pinned)

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event != "connection.connect_tcp.complete":
            return
        stream = info["return_value"]
        peer = stream.get_extra_info("server_addr")
        if peer is None or ipaddress.ip_address(str(peer[0]).split("%", 1)[0]) != expected:
            await stream.aclose()
            raise PeerMismatch(f"connected to {peer!r}, not to the checked address {pinned}")

    return trace


class PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to an address of its host that was checked for this very request.

    Layered over an ``httpx.AsyncHTTPTransport``: per request, :func:`resolve_target`
    (refusals raise :class:`InvalidRequest`), then the URL's host is replaced by the
    pinned address, with the ``Host`` header as built from the original URL, the name as
    TLS SNI and certificate hostname, and the connection's peer checked. Use one
    transport per receiver: its connection pool is keyed by address.
    """

    def __init__(self, allow: frozenset[str], *, verify: ssl.SSLContext | bool = True) -> None:
        self._allow = allow
        self._inner = httpx.AsyncHTTPTransport(verify=verify, retries=0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Resolve, check, pin, send."""
        target = await resolve_target(str(request.url), self._allow)
        request.headers.setdefault("Host", request.url.netloc.decode("ascii"))
        request.url = request.url.copy_with(host=target.pinned)
        request.extensions = {
            **request.extensions,
            "sni_hostname": target.host,
            "trace": verify_peer(target.pinned),
        }
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._inner.aclose()
