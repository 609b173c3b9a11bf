"""Every outbound client of a process verifies servers with one TLS context: the CA
bundle is read once, not once per judge backend, Batch API client or checkpoint sent."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from judge.backends.http import tls_context
from judge.backends.ollama import OllamaBackend
from judge.backends.openai import OpenAIBackend


@pytest.fixture
def bundle_reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Each time a CA bundle is loaded into a TLS context, from a fresh process state."""
    reads: list[Any] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        reads.append(args or kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    tls_context.cache_clear()
    yield reads
    tls_context.cache_clear()


async def test_judge_clients_read_the_ca_bundle_once(bundle_reads: list[Any]) -> None:
    openai_backends = [OpenAIBackend("m", base_url=f"https://judge-{i}.test/v1") for i in range(3)]
    ollama_backends = [OllamaBackend("m", base_url=f"https://ollama-{i}.test") for i in range(3)]
    batch = openai_backends[0].batch_client()
    try:
        assert len(bundle_reads) == 1
    finally:
        await batch.close()
        for backend in [*openai_backends, *ollama_backends]:
            await backend.aclose()


def test_the_shared_context_checks_certificates_and_names() -> None:
    context = tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
