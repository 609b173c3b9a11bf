"""Webhook targets: which addresses are public, and a request that goes to the address
that was checked, with the name kept for the Host header, TLS SNI and the certificate."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpcore
import httpx
import pytest

from api.service.errors import InvalidRequest
from api.webhooks.target import (
    PeerMismatch,
    PinnedTransport,
    refusal,
    resolve_target,
    verify_peer,
)
from tests.support.network import hook_network
from tests.support.webhook_receiver import Receiver, receiving

PUBLIC_V4 = "93.184.215.14"


@pytest.mark.parametrize(
    ("address", "why"),
    [
        # IPv6 forms that carry a loopback, private or metadata IPv4 address
        ("::127.0.0.1", "IPv4-compatible"),
        ("::8.8.8.8", "IPv4-compatible"),  # deprecated: refused whatever it carries
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:0:127.0.0.1", "loopback"),  # IPv4-translated
        ("::ffff:0:10.1.2.3", "private"),
        ("64:ff9b::127.0.0.1", "loopback"),  # NAT64
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("64:ff9b::c0a8:1", "private"),
        ("64:ff9b:1::5db8:d70e", "local-use NAT64"),  # whatever it carries
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", "link-local"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
        ("fec0::1", "site-local"),
        ("fc00::1", "unique local"),
        ("fd12:3456::1", "unique local"),
        ("fe80::1", "link-local"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),
        ("100::1", "discard-only"),
        ("5f00::1", "segment routing"),
        ("4000::1", "outside global unicast"),
        # IPv4
        ("127.0.0.1", "loopback"),
        ("0.0.0.0", "this network"),
        ("10.0.0.7", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("169.254.169.254", "link-local"),
        ("172.16.5.4", "private"),
        ("192.0.0.8", "IETF protocol"),
        ("192.168.1.1", "private"),
        ("198.18.0.1", "benchmarking"),
        ("203.0.113.9", "documentation"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
    ],
)
def test_every_non_public_form_is_refused_with_its_reason(address: str, why: str) -> None:
    reason = refusal(address)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    "address",
    [
        PUBLIC_V4,
        "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
        "::ffff:93.184.215.14",  # the forms that carry a public IPv4 address stay usable
        "64:ff9b::5db8:d70e",
        "2002:5db8:d70e::1",
    ],
)
def test_public_addresses_and_forms_carrying_one_are_accepted(address: str) -> None:
    assert refusal(address) is None


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for ``hooks.test`` (and no other name or address)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=hooks.test",
         "-addext", "subjectAltName=DNS:hooks.test", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_receiver(certificate: tuple[Path, Path]) -> Iterator[tuple[Receiver, list[str]]]:
    """An HTTPS receiver serving the certificate, and the SNI names it was asked for."""
    cert, key = certificate
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    names: list[str] = []
    server.sni_callback = lambda _sock, name, _ctx: names.append(str(name))  # type: ignore[assignment,misc]
    with receiving(tls=server) as receiver:
        yield receiver, names


async def test_a_pinned_request_keeps_the_name_for_host_sni_and_certificate(
    monkeypatch: pytest.MonkeyPatch,
    certificate: tuple[Path, Path],
    tls_receiver: tuple[Receiver, list[str]],
) -> None:
    receiver, names = tls_receiver
    port = receiver.url.split(":")[2].split("/")[0]
    network = hook_network(monkeypatch)
    network.answers["hooks.test"] = lambda n: "127.0.0.1"
    network.answers["other.test"] = lambda n: "127.0.0.1"
    trust = ssl.create_default_context(cafile=str(certificate[0]))
    transport = PinnedTransport(frozenset({"hooks.test", "other.test"}), verify=trust)
    async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
        answer = await client.post(f"https://hooks.test:{port}/hook", content=b"{}")
        assert answer.status_code == 200
        assert receiver.hosts == [f"hooks.test:{port}"] and names == ["hooks.test"]
        # the same address under a name the certificate does not carry: refused by TLS
        with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
            await client.post(f"https://other.test:{port}/hook", content=b"{}")
    assert network.lookups == {"hooks.test": 1, "other.test": 1}  # one lookup a request


async def test_a_name_is_resolved_once_a_request_and_refused_when_not_public(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    network = hook_network(monkeypatch)
    network.answers["rebind.test"] = lambda n: PUBLIC_V4 if n % 2 == 0 else "127.0.0.1"
    transport = PinnedTransport(frozenset())
    async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
        with pytest.raises(httpx.ConnectError):  # sent to the checked public address
            await client.post("http://rebind.test:8080/hook", content=b"{}")
        assert network.refused == [(PUBLIC_V4, 8080)]
        with pytest.raises(InvalidRequest, match=r"127\.0\.0\.1 \(loopback\)"):
            await client.post("http://rebind.test:8080/hook", content=b"{}")
    assert network.lookups["rebind.test"] == 2 and network.refused == [(PUBLIC_V4, 8080)]


async def test_a_connection_to_another_peer_than_the_pinned_address_is_closed_unused() -> None:
    with receiving() as receiver:
        port = int(receiver.url.split(":")[2].split("/")[0])
        stream = await httpcore.AnyIOBackend().connect_tcp("127.0.0.1", port)
        connected = {"return_value": stream}
        await verify_peer("127.0.0.1")("connection.connect_tcp.complete", connected)
        with pytest.raises(PeerMismatch, match=r"127\.0\.0\.2"):
            await verify_peer("127.0.0.2")("connection.connect_tcp.complete", connected)
    assert receiver.requests == 0


@pytest.mark.parametrize(
    "url", ["http://[::1/hook", "http://hooks.test:99999/", "ftp://hooks.test/", "http:///hook"]
)
async def test_a_malformed_target_is_refused_as_a_bad_url(url: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        await resolve_target(url, frozenset({"hooks.test"}))
    assert refused.value.field == "url"
