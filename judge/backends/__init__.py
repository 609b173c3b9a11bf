"""Judge backends behind one protocol, and building one from a spec."""

from __future__ import annotations

from collections.abc import Callable

from judge.backends.base import JudgeBackend
from judge.backends.ollama import OllamaBackend
from judge.backends.openai import OpenAIBackend
from judge.backends.scripted import ScriptedBackend
from judge.spec import JudgeSpec

__all__ = [
    "BACKENDS",
    "JudgeBackend",
    "OllamaBackend",
    "OpenAIBackend",
    "ScriptedBackend",
    "build_backend",
]


def _ollama(spec: JudgeSpec, timeout: float) -> JudgeBackend:
    return OllamaBackend(spec.model, base_url=spec.base_url, timeout=timeout)


def _openai(spec: JudgeSpec, timeout: float) -> JudgeBackend:
    return OpenAIBackend(spec.model, base_url=spec.base_url, timeout=timeout)


def _scripted(spec: JudgeSpec, timeout: float) -> JudgeBackend:
    return ScriptedBackend.for_mode(spec.model, base_url=spec.base_url)


#: backend name -> factory(spec, timeout)
BACKENDS: dict[str, Callable[[JudgeSpec, float], JudgeBackend]] = {
    "ollama": _ollama,
    "openai": _openai,
    "scripted": _scripted,
}


def build_backend(spec: JudgeSpec, *, timeout: float = 120.0) -> JudgeBackend:
    """A backend for a parsed spec (the spec parser already rejected unknown backends)."""
    return BACKENDS[spec.backend](spec, timeout)
