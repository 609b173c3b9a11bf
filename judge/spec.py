"""Judge specs, ``BACKEND:MODEL[@BASE_URL]``, and panels, ``panel:SPEC1,SPEC2``.

The model may contain colons (``ollama:qwen3:8b``); everything after the last ``@``
is the base URL (``openai:qwen2.5-1.5b@http://127.0.0.1:8080/v1``). Without a base
URL the clients' own defaults and variables apply (``OLLAMA_HOST``,
``OPENAI_BASE_URL``, ``OPENAI_API_KEY``). A grading made by a panel records the judge
spec ``panel:`` followed by its members' specs, comma-separated.

This module is the one reader of that grammar: :func:`parse_judge_spec` and
:func:`parse_panel` validate, :func:`split_spec`, :func:`member_specs` and
:func:`panel_specs_named` read specs as recorded (which need not be valid any more),
:func:`judge_identity` names a judge without its endpoint and :func:`panel_spec_pattern`
finds a panel's recorded specs by those names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlparse

from judge.errors import JudgeSpecError

__all__ = [
    "BACKEND_NAMES",
    "PANEL_PREFIX",
    "SCRIPTED_MODES",
    "SPEC_FORMS",
    "JudgeSpec",
    "judge_identity",
    "member_specs",
    "model_identity",
    "panel_model",
    "panel_spec",
    "panel_spec_pattern",
    "panel_specs_named",
    "parse_judge_spec",
    "parse_panel",
    "recorded_judge",
    "split_spec",
]

#: the judge spec of a grading made by a panel: ``panel:SPEC1,SPEC2``
PANEL_PREFIX = "panel:"

BACKEND_NAMES = ("ollama", "openai", "scripted")

SPEC_FORMS = (
    "accepted forms: ollama:MODEL[@BASE_URL] (e.g. ollama:qwen3:8b@http://127.0.0.1:11434), "
    "openai:MODEL[@BASE_URL] (e.g. openai:gpt-4o-mini or "
    "openai:qwen2.5-1.5b@http://127.0.0.1:8080/v1), "
    "scripted:pass|fail|garbage (a scripted judge for demos and tests, not a model)"
)


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    """A parsed judge spec."""

    backend: str
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        text = f"{self.backend}:{self.model}"
        return f"{text}@{self.base_url}" if self.base_url else text


def split_spec(text: str) -> tuple[str, str, str | None]:
    """``(backend, model, base_url)`` of a spec as written, without validating it.

    For specs read back from records; ``base_url`` is None when there is no ``@``.
    """
    backend, _, rest = text.partition(":")
    model, at, base_url = rest.rpartition("@")
    return (backend, model, base_url) if at else (backend, rest, None)


#: the canned judges of ``scripted:MODE`` (``judge.backends.scripted``)
SCRIPTED_MODES = ("pass", "fail", "garbage")


#: the longest judge spec and the longest model name a grading records (its columns)
MAX_SPEC_CHARACTERS = 512
MAX_MODEL_CHARACTERS = 256


def parse_judge_spec(text: str) -> JudgeSpec:
    """Parse ``BACKEND:MODEL[@BASE_URL]``; raise JudgeSpecError naming the accepted forms
    (a spec or model name longer than a grading can record too)."""
    if len(text.strip()) > MAX_SPEC_CHARACTERS:
        raise JudgeSpecError(f"a judge spec holds at most {MAX_SPEC_CHARACTERS} characters")
    backend, model, base_url = split_spec(text.strip())
    if not backend or (not model and base_url is None):
        raise JudgeSpecError(f"malformed judge spec {text!r}; {SPEC_FORMS}")
    backend = backend.lower()
    if backend not in BACKEND_NAMES:
        raise JudgeSpecError(f"unknown judge backend {backend!r}; {SPEC_FORMS}")
    model = model.strip()
    if not model:
        raise JudgeSpecError(f"judge spec {text!r} names no model; {SPEC_FORMS}")
    if len(model) > MAX_MODEL_CHARACTERS:
        raise JudgeSpecError(
            f"a judge's model name holds at most {MAX_MODEL_CHARACTERS} characters"
        )
    if base_url is not None:
        _check_base_url(text, base_url)
    return JudgeSpec(backend=backend, model=model, base_url=(base_url or "").rstrip("/") or None)


def _check_base_url(text: str, base_url: str) -> None:
    """Raise JudgeSpecError unless ``base_url`` is an http(s) URL with a host, with a
    port from 0 to 65535 where it names one (``:99999`` or ``:11434x`` would fail every
    call to the judge and every reader of its address), that the judges' HTTP client
    can read (:func:`_unaskable`: else building the judge would fail)."""
    try:
        parsed = urlparse(base_url)
    except ValueError:  # e.g. an unclosed [ of an IPv6 address
        parsed = urlparse("")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise JudgeSpecError(
            f"judge spec {text!r} has base URL {base_url!r}, not an http(s) URL with a host; "
            f"{SPEC_FORMS}"
        )
    try:
        parsed.port  # noqa: B018 - urllib reads the port when asked, raising for no port
    except ValueError:
        raise JudgeSpecError(
            f"judge spec {text!r} has base URL {base_url!r}, whose port is not a number "
            f"from 0 to 65535; {SPEC_FORMS}"
        ) from None
    fault = _unaskable(base_url)
    if fault is not None:
        raise JudgeSpecError(
            f"judge spec {text!r} has base URL {base_url!r}, which no HTTP client can ask "
            f"({fault}); {SPEC_FORMS}"
        )


@lru_cache(maxsize=256)
def _unaskable(base_url: str) -> str | None:
    """Why httpx, which both judge clients send with, refuses ``base_url`` (a control
    character, a host that is no IDNA name, a lone surrogate), or None if it reads it.

    httpx is imported here, when a base URL is checked: importing the grammar (the
    command line does) loads no HTTP client. Remembered per URL: the recorded specs of
    a listing's rows are read again and again (``judge_identity``)."""
    import httpx

    try:
        httpx.URL(base_url)
    except (httpx.InvalidURL, UnicodeError) as exc:
        return str(exc)
    return None


def parse_panel(text: str) -> list[str]:
    """The member specs of a comma-separated panel, each validated and listed once; a
    panel of no member (``","``) is refused, not read as no panel.

    Members are told apart by their parsed specs, so one judge spelled two ways (its
    backend in capitals, a trailing ``/`` on its URL, a blank before its model) is
    listed twice and refused: it would vote twice. Two members of one ``backend:model``
    at different addresses are refused too: a judge's qualification, digest and canary
    schedule are kept under its name without its address (:func:`judge_identity`), so
    the two would share them and could not be told apart."""
    specs = [part.strip() for part in text.split(",") if part.strip()]
    if not specs:
        raise JudgeSpecError(f"a panel lists at least one judge spec; {SPEC_FORMS}")
    parsed = [parse_judge_spec(spec) for spec in specs]
    if len(set(parsed)) != len(parsed):
        raise JudgeSpecError("a panel lists each judge once")
    names = [judge_identity(spec) for spec in specs]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise JudgeSpecError(
            f"a panel lists each backend:model once: {repeated} is listed at two "
            "addresses, and its qualification, model digest and canary schedule, kept "
            "under that name, cannot tell them apart"
        )
    if len(panel_model(specs)) > MAX_MODEL_CHARACTERS:  # what its gradings record as model
        raise JudgeSpecError(
            f"a panel's member specs hold at most {MAX_MODEL_CHARACTERS} characters together"
        )
    return specs


def panel_spec(members: Sequence[str]) -> str:
    """The judge spec recorded for a grading made by a panel of ``members``."""
    return PANEL_PREFIX + ",".join(members)


def panel_model(members: Sequence[str]) -> str:
    """The judge model recorded for a grading made by a panel: its members' specs by ``+``."""
    return "+".join(members)


def model_identity(backend: str, model: str) -> str:
    """A recorded judge model without base URLs (a panel's members as ``backend:model``)."""
    if backend != "panel":
        return model
    return panel_model([judge_identity(member) for member in model.split("+")])


def member_specs(judge_spec: str) -> list[str]:
    """The judge specs behind a grading's judge spec (one, or a panel's members)."""
    if judge_spec.startswith(PANEL_PREFIX):
        return [s for s in judge_spec[len(PANEL_PREFIX) :].split(",") if s]
    return [judge_spec]


def panel_specs_named(text: str) -> list[str]:
    """The judge specs recorded by gradings of the panel ``text`` names; none when it
    names no panel.

    ``text`` is ``panel:`` and the members' specs, separated by ``,`` (the panel's judge
    spec) or by ``+`` (``backend:model`` as its gradings show it), each read as recorded
    (not validated; blanks around it dropped). An ``@`` is always a member's base URL,
    never the panel's. Without a ``,`` the text could be either spelling (a base URL may
    hold a ``+``): both readings are given."""
    if not text.startswith(PANEL_PREFIX):
        return []
    listed = text[len(PANEL_PREFIX) :]
    separators = [","] if "," in listed else [",", "+"]
    readings = [[m.strip() for m in listed.split(sep) if m.strip()] for sep in separators]
    return sorted({panel_spec(members) for members in readings if members})


def panel_spec_pattern(text: str) -> str | None:
    """A regular expression matching the judge specs recorded by gradings of the panel
    ``text`` names (read as :func:`panel_specs_named` reads it), whatever base URLs its
    members run at: each member is matched by its :func:`judge_identity`, and a base URL
    written in ``text`` is dropped, never compared. None when ``text`` names no panel.

    Where ``text`` reads both ways, a ``+`` is the start of the next member, not part of
    a base URL: as URLs are not compared, ``panel:A@URL+B`` read as the panel of ``A``
    alone (at the URL ``URL+B``) would name a panel ``text`` does not mean.

    Written in what PostgreSQL's and Python's regular expressions read alike (``\\A``,
    ``\\Z``, ``(?:)``, ``\\s``, classes and escaped literals), for a database to match."""
    readings = [member_specs(spec) for spec in panel_specs_named(text)]
    if len(readings) > 1:
        readings = [r for r in readings if not any("+" in (split_spec(m)[2] or "") for m in r)]
    if not readings:
        return None
    panels = {",".join(_member_pattern(judge_identity(m)) for m in members) for members in readings}
    return r"\A" + re.escape(PANEL_PREFIX) + "(?:" + "|".join(sorted(panels)) + r")\Z"


def _member_pattern(identity: str) -> str:
    """The specs a panel records for the member named ``identity``: as
    :func:`parse_judge_spec` reads them, the backend in any case, blanks around the
    model, and any base URL (which holds no ``,`` nor ``@``); a name that does not parse
    is its own identity, matched as written."""
    try:
        spec = parse_judge_spec(identity)
    except JudgeSpecError:
        return re.escape(identity)
    backend = "".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in spec.backend)
    return backend + r":\s*" + re.escape(spec.model) + r"\s*(?:@[^,@]*)?"


def judge_identity(spec_text: str) -> str:
    """``backend:model`` of a judge spec (base URLs dropped, also of panel members).

    A spec that does not parse is its own identity.
    """
    if spec_text.startswith(PANEL_PREFIX):
        return panel_spec([judge_identity(m) for m in member_specs(spec_text)])
    try:
        spec = parse_judge_spec(spec_text)
    except JudgeSpecError:
        return spec_text
    return f"{spec.backend}:{spec.model}"


def recorded_judge(text: str) -> tuple[str, str, str]:
    """``(spec, backend, model)`` a grading records for a judge spec or a panel spec.

    A panel (``panel:SPEC1,SPEC2``) records backend ``panel`` and its members joined by
    ``+`` as the model. Raises JudgeSpecError for a spec that does not parse.
    """
    if text.startswith(PANEL_PREFIX):
        members = parse_panel(text[len(PANEL_PREFIX) :])
        return panel_spec(members), "panel", panel_model(members)
    spec = parse_judge_spec(text)
    return text, spec.backend, spec.model
