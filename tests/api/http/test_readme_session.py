"""The docs' "A session with curl" (docs/api.md), run as written, its sample output current.

The test takes the ``curl`` commands from that section's ``sh`` block (methods, paths,
headers and bodies as a reader copies them), sends them to the app with the scripted
judge ``scripted:pass`` (what the page says the sample was captured with) and the
default pass policy, and renders the answers the way the block after "What that looks
like" shows them: ids and times replaced by placeholders, the answers after the first
(when the view has them) counted, not shown. The block must equal that rendering, so
the sample cannot go stale.

To rewrite the block after a change of the grading object (only that block is
touched; the variable keeps its old name)::

    SRE_JUDGE_UPDATE_README=1 .venv/bin/pytest tests/api/http/test_readme_session.py -n 0
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api.service.settings import Settings

SESSION_PAGE = Path(__file__).resolve().parents[3] / "docs" / "api.md"
SERVER = "http://127.0.0.1:8000"
#: where the sample output starts: the text block after this sentence's paragraph
SAMPLE_INTRO = "What that looks like"
#: the request the sample adds to the session: a submission without a ground truth
BAD_BODY = {"diagnosis": "x"}
#: ids of gradings, submissions and calls (32 hex digits), of tokens (12)
_ID = re.compile(r"[0-9a-f]{32}|[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


@dataclass
class Curl:
    """One ``curl`` command of the docs' session: what it sends."""

    method: str = "GET"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def readme_curls(text: str) -> list[Curl]:
    """The curl commands of the session's ``sh`` block, in order."""
    section = _section(text, "## A session with curl")
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands: list[list[str]] = []
    pending = ""
    for line in block.splitlines():
        pending += line + "\n"
        if line.endswith("\\"):
            continue
        try:
            tokens = shlex.split(pending.replace("\\\n", " "), comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        pending = ""
        if tokens and tokens[0] == "curl":
            commands.append(tokens[1:])
    curls = []
    for tokens in commands:
        curl, words = Curl(), iter(tokens)
        for word in words:
            if word == "-X":
                curl.method = next(words)
            elif word == "-H":
                name, _, value = next(words).partition(":")
                curl.headers[name.strip()] = value.strip()
            elif word == "-d":
                curl.body = next(words)
                curl.method = curl.method if "-X" in tokens else "POST"
            elif word.startswith("http"):
                curl.url = word.removeprefix(SERVER)
        curls.append(curl)
    return curls


def _placeholders(value: Any, key: str = "", parent: str = "") -> Any:
    """The value with ids and timestamps as placeholders named after their field (an
    ``id`` inside ``submission`` is ``<submission_id>``)."""
    if isinstance(value, dict):
        return {k: _placeholders(v, k, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholders(v, key, parent) for v in value]
    if isinstance(value, str) and _ID.fullmatch(value):
        return f"<{parent}_id>" if key == "id" and parent else f"<{key or 'id'}>"
    if isinstance(value, str) and key.endswith("_at") and _TIME.fullmatch(value):
        return "<time>"
    return value


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _grading_lines(grading: dict[str, Any]) -> list[str]:
    """One top-level field a line; a list of objects one object a line, the answers (in
    the views that have them) after the first counted."""
    lines = ["{"]
    items = list(grading.items())
    for position, (name, value) in enumerate(items):
        comma = "," if position < len(items) - 1 else ""
        if name == "answers" and len(value) > 1:
            value = [value[0], f"... {len(value) - 1} more ..."]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f' "{name}": [')
            lines += [f"  {_compact(v)}," for v in value[:-1]] + [f"  {_compact(value[-1])}"]
            lines.append(f" ]{comma}")
        else:
            lines.append(f' "{name}": {_compact(value)}{comma}')
    return [*lines, "}"]


def render_sample(answers: list[tuple[str, int, Any]]) -> str:
    """The sample block's text: each request's ``$ curl ...`` line, status and answer."""
    lines = []
    for request, status, body in answers:
        lines.append(f"$ curl ... {request}          -> HTTP {status}")
        shown = _placeholders(body)
        if isinstance(shown, dict) and "submission_id" in shown:  # a grading
            lines += _grading_lines(shown)
        else:
            lines.append(json.dumps(shown, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def _sample_span(text: str) -> tuple[int, int]:
    """Where the sample block's content starts and ends in the page."""
    intro = text.index(SAMPLE_INTRO, text.index("## A session with curl"))
    start = text.index("```text\n", intro) + len("```text\n")
    return start, text.index("```", start)


async def test_the_readme_curl_session_runs_and_its_sample_output_is_current(
    api_client: Any, tokens: Any
) -> None:
    text = SESSION_PAGE.read_text(encoding="utf-8")
    curls = readme_curls(text)
    assert [(c.method, c.url.split("?")[0]) for c in curls] == [
        ("POST", "/v1/scenarios"),
        ("POST", "/v1/submissions"),
        ("GET", "/v1/gradings/<id>"),
    ]
    roles = {"$ADMIN": await tokens("admin", "me"), "$AGENT": await tokens("submitter", "my-agent")}
    answers: list[tuple[str, int, Any]] = []
    # what a reader's ``serve`` does: the default pass policy (the test fixture's is
    # more lenient); no random review sample, so the output does not vary
    policy = Settings.model_fields["pass_policy"].default
    async with api_client(judge="scripted:pass", pass_policy=policy) as client:
        grading_id = ""
        for curl in curls:
            headers = dict(curl.headers)
            token = headers.pop("Authorization", "").removeprefix("Bearer ").strip()
            headers.update(roles[token])
            url = curl.url.replace("<id>", grading_id)
            content = curl.body.encode() if curl.body is not None else None
            response = await client.request(curl.method, url, content=content, headers=headers)
            assert response.status_code in (200, 201), (curl, response.text)
            if curl.url.startswith("/v1/submissions"):
                grading_id = response.json()["id"]
            answers.append((curl.url, response.status_code, response.json()))
        bad = await client.post("/v1/submissions", json=BAD_BODY, headers=roles["$AGENT"])
    assert answers[2][2] == answers[1][2]  # the grading read back is the one the wait gave
    shown = [
        ("/v1/scenarios", answers[0][1], answers[0][2]),
        (f"'{curls[1].url}'", answers[1][1], answers[1][2]),
        (f"/v1/submissions -d '{json.dumps(BAD_BODY)}'", bad.status_code, bad.json()),
    ]
    sample = render_sample(shown)
    start, end = _sample_span(text)
    if os.environ.get("SRE_JUDGE_UPDATE_README") == "1":
        current = SESSION_PAGE.read_text(encoding="utf-8")  # re-read: others may edit meanwhile
        start, end = _sample_span(current)
        SESSION_PAGE.write_text(current[:start] + sample + current[end:], encoding="utf-8")
        return
    assert text[start:end] == sample, (
        "the sample output of the curl session in docs/api.md is out of date; rewrite it with "
        "SRE_JUDGE_UPDATE_README=1 (see this module's docstring)"
    )
