"""The real model's fixtures: SmolLM2-135M behind llama-cpp-python's OpenAI-compatible server.

The tests are spread over several files so that ``--dist loadfile`` shares them out between
workers; the server is session-scoped, so it starts once per worker that runs one of them
(about a second).

Skipped when llama-cpp-python or the model is not installed (``scripts/real-model.sh``);
with ``CI=true`` the fixture fails instead, so CI cannot silently lose these tests.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import pytest

from judge.backends.openai import OpenAIBackend
from judge.backends.streaming import StreamLimits
from judge.rubric import Rubric, load_rubric_dir
from tests.support.llama_server import LlamaServer, require_real_model, running_llama_server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The real model's server, started once per worker for the tests that ask for it."""
    require_real_model()
    started = time.monotonic()
    with running_llama_server(tmp_path_factory.mktemp("llama")) as server:
        print(f"llama_cpp.server ready in {time.monotonic() - started:.1f}s")
        yield server


@pytest.fixture
async def real_backend(llama_server: LlamaServer) -> AsyncIterator[OpenAIBackend]:
    """The ``openai`` backend pointed at the real model's server."""
    limits = StreamLimits(first_token=300, idle=60, total=600)
    backend = OpenAIBackend(llama_server.model, base_url=llama_server.base_url, limits=limits)
    yield backend
    await backend.aclose()


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    """The SREGym root-cause rubric the real model grades with."""
    return load_rubric_dir()["sregym-rca"]
