"""Judge backends behind one protocol, and building one from a spec.

The Ollama and OpenAI clients are imported when their backend is first built or named
(``judge.backends.OpenAIBackend``), not with the package: the command line starts faster
and a process that uses one judge does not load the other's client.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from judge.backends.base import EndpointQuirks, JudgeBackend
from judge.backends.scripted import ScriptedBackend
from judge.backends.streaming import StreamLimits
from judge.spec import JudgeSpec

if TYPE_CHECKING:
    from judge.backends.ollama import OllamaBackend
    from judge.backends.openai import OpenAIBackend

#: names this package exports from the client modules, imported on first use
_LAZY = {
    "OllamaBackend": "judge.backends.ollama",
    "OpenAIBackend": "judge.backends.openai",
}


def __getattr__(name: str) -> Any:
    """``OllamaBackend`` and ``OpenAIBackend``, imported when asked for."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def _ollama(spec: JudgeSpec, limits: StreamLimits, quirks: EndpointQuirks | None) -> JudgeBackend:
    from judge.backends.ollama import OllamaBackend

    return OllamaBackend(spec.model, base_url=spec.base_url, limits=limits)


def _openai(spec: JudgeSpec, limits: StreamLimits, quirks: EndpointQuirks | None) -> JudgeBackend:
    from judge.backends.openai import OpenAIBackend

    quirks = quirks or EndpointQuirks()
    return OpenAIBackend(spec.model, base_url=spec.base_url, limits=limits, quirks=quirks)


def _scripted(spec: JudgeSpec, limits: StreamLimits, quirks: EndpointQuirks | None) -> JudgeBackend:
    # a judge the service runs: it keeps none of the prompts it answered
    return ScriptedBackend.for_mode(spec.model, base_url=spec.base_url, record=False)


#: backend name -> factory(spec, limits, quirks)
BACKENDS: dict[str, Callable[[JudgeSpec, StreamLimits, EndpointQuirks | None], JudgeBackend]] = {
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
    return BACKENDS[spec.backend](spec, limits or StreamLimits(), quirks)
