"""The test process's network as a test says: names resolve to the test's answers, and
connections leave only to loopback.

``hook_network(monkeypatch)`` replaces ``socket.getaddrinfo`` (which asyncio's and
anyio's resolvers call) for the names a test answers, counting each lookup, and refuses
every connection of the process to an address that is not loopback (``ENETUNREACH``),
recording where it was headed: a test may use public addresses without a packet
leaving the machine.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["Network", "hook_network"]


@dataclass
class Network:
    """What the hooked network answers and saw."""

    #: host -> the address of its n-th lookup (0-based), so an answer may change (TTL 0)
    answers: dict[str, Callable[[int], str]] = field(default_factory=dict)
    #: host -> lookups of it so far
    lookups: Counter[str] = field(default_factory=Counter)
    #: (address, port) of every connection refused because it would leave the machine
    refused: list[tuple[str, int]] = field(default_factory=list)


def hook_network(monkeypatch: pytest.MonkeyPatch) -> Network:
    """Hook this process's resolver and connections for the test's duration."""
    network = Network()
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in network.answers:
            return real_getaddrinfo(host, port, *args, **kwargs)
        address = network.answers[name](network.lookups[name])
        network.lookups[name] += 1
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sockaddr = (
            (address, int(port or 0), 0, 0)
            if family == socket.AF_INET6
            else (address, int(port or 0))
        )
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr)]

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0]).split("%", 1)[0]
            if not ipaddress.ip_address(host).is_loopback:
                network.refused.append((host, int(address[1])))
                raise OSError(errno.ENETUNREACH, f"tests do not leave the machine ({host})")
        real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    return network
