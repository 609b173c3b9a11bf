"""Judge backends behind one protocol, and building one from a spec."""

from __future__ import annotations

from collections.abc import Callable

from judge.backends.base import JudgeBackend
from judge.backends.ollama import OllamaBackend
from judge.backends.openai import EndpointQuirks, OpenAIBackend
from judge.backends.scripted import ScriptedBackend
from judge.backends.streaming import StreamLimits
from judge.spec import JudgeSpec

__all__ = [
    "BACKENDS",
    "EndpointQuirks",
    "JudgeBackend",
    "OllamaBackend",
    "OpenAIBackend",
    "ScriptedBackend",
    "StreamLimits",
    "build_backend",
]


def _ollama(spec: JudgeSpec, limits: StreamLimits, quirks: EndpointQuirks) -> JudgeBackend:
    return OllamaBackend(spec.model, base_url=spec.base_url, limits=limits)


def _openai(spec: JudgeSpec, limits: StreamLimits, quirks: EndpointQuirks) -> JudgeBackend:
    return OpenAIBackend(spec.model, base_url=spec.base_url, limits=limits, quirks=quirks)


def _scripted(spec: JudgeSpec, limits: StreamLimits, quirks: EndpointQuirks) -> JudgeBackend:
    return ScriptedBackend.for_mode(spec.model, base_url=spec.base_url)


#: backend name -> factory(spec, limits, quirks)
BACKENDS: dict[str, Callable[[JudgeSpec, StreamLimits, EndpointQuirks], JudgeBackend]] = {
    "ollama": _ollama,
    "openai": _openai,
    "scripted": _scripted,
}


def build_backend(
    spec: JudgeSpec,
    *,
    limits: StreamLimits | None = None,
    quirks: EndpointQuirks | None = None,
) -> JudgeBackend:
    """A backend for a parsed spec (the spec parser already rejected unknown backends).

    ``limits``: how long a streamed reply may take (defaults: :class:`StreamLimits`).
    ``quirks``: what endpoints were found to refuse, shared by the backends built with
    it (a pool passes one); a fresh memory when None.
    """
    return BACKENDS[spec.backend](spec, limits or StreamLimits(), quirks or EndpointQuirks())
