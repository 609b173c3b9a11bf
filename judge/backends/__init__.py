"""Judge backends behind one protocol, and building one from a spec."""

from __future__ import annotations

from collections.abc import Callable

from judge.backends.base import JudgeBackend
from judge.backends.ollama import OllamaBackend
from judge.backends.openai import EndpointQuirks, OpenAIBackend
from judge.backends.scripted import ScriptedBackend
from judge.spec import JudgeSpec

__all__ = [
    "BACKENDS",
    "EndpointQuirks",
    "JudgeBackend",
    "OllamaBackend",
    "OpenAIBackend",
    "ScriptedBackend",
    "build_backend",
]


def _ollama(spec: JudgeSpec, timeout: float, quirks: EndpointQuirks) -> JudgeBackend:
    return OllamaBackend(spec.model, base_url=spec.base_url, timeout=timeout)


def _openai(spec: JudgeSpec, timeout: float, quirks: EndpointQuirks) -> JudgeBackend:
    return OpenAIBackend(spec.model, base_url=spec.base_url, timeout=timeout, quirks=quirks)


def _scripted(spec: JudgeSpec, timeout: float, quirks: EndpointQuirks) -> JudgeBackend:
    return ScriptedBackend.for_mode(spec.model, base_url=spec.base_url)


#: backend name -> factory(spec, timeout, quirks)
BACKENDS: dict[str, Callable[[JudgeSpec, float, EndpointQuirks], JudgeBackend]] = {
    "ollama": _ollama,
    "openai": _openai,
    "scripted": _scripted,
}


def build_backend(
    spec: JudgeSpec, *, timeout: float = 120.0, quirks: EndpointQuirks | None = None
) -> JudgeBackend:
    """A backend for a parsed spec (the spec parser already rejected unknown backends).

    ``quirks``: what endpoints were found to refuse, shared by the backends built with
    it (a pool passes one); a fresh memory when None.
    """
    return BACKENDS[spec.backend](spec, timeout, quirks or EndpointQuirks())
