"""The judge-spec and panel grammar: one parser, and readers of recorded specs."""

from __future__ import annotations

import re

import pytest

from judge.errors import JudgeSpecError
from judge.spec import (
    JudgeSpec,
    judge_identity,
    member_specs,
    panel_spec,
    panel_spec_pattern,
    parse_judge_spec,
    parse_panel,
    split_spec,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ollama:qwen3:8b", JudgeSpec("ollama", "qwen3:8b")),
        (" OLLAMA:qwen3:8b@http://127.0.0.1:11434/ ", JudgeSpec("ollama", "qwen3:8b", "http://127.0.0.1:11434")),
        ("openai:qwen2.5-1.5b@http://127.0.0.1:8080/v1", JudgeSpec("openai", "qwen2.5-1.5b", "http://127.0.0.1:8080/v1")),
        ("openai:org@model@https://api.example", JudgeSpec("openai", "org@model", "https://api.example")),
        ("scripted:pass", JudgeSpec("scripted", "pass")),
    ],
)  # fmt: skip
def test_specs_parse_and_print_back(text: str, expected: JudgeSpec) -> None:
    spec = parse_judge_spec(text)
    assert spec == expected
    assert parse_judge_spec(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("ollama", "malformed"),
        ("ollama:", "malformed"),
        (":qwen3", "malformed"),
        ("vllm:qwen3", "unknown judge backend"),
        ("ollama:@http://h", "names no model"),
        ("ollama: @http://h", "names no model"),
        ("openai:m@ftp://h", r"not an http\(s\) URL"),
        ("openai:m@http://[::1", r"not an http\(s\) URL"),  # urlparse raised: a 500
        ("openai:m@", r"not an http\(s\) URL"),
        ("openai:m@http://:8080/v1", r"not an http\(s\) URL with a host"),  # no server
        ("openai:m@http://127.0.0.1:99999/v1", "port is not a number from 0 to 65535"),
        ("ollama:m@http://127.0.0.1:11434x", "port is not a number from 0 to 65535"),
        # what no HTTP client can ask: building the judge raised, a regrade job's 500
        ("openai:m@http://127.0.0.1:8080/v1\x01", "no HTTP client can ask"),
        ("ollama:qwen3:8b@http://gpu\x7fbox:11434", "no HTTP client can ask"),
        ("openai:m@http://127.0.0.1:8080/v1?k=\x1fv", "no HTTP client can ask"),
        ("ollama:m@http://gpu\xa0box:11434", "no HTTP client can ask"),  # no IDNA name
        ("openai:m@http://127.0.0.1:8080/\ud800", "no HTTP client can ask"),  # a surrogate
    ],
)
def test_bad_specs_name_the_fault_and_the_accepted_forms(text: str, fault: str) -> None:
    with pytest.raises(JudgeSpecError, match=fault) as caught:
        parse_judge_spec(text)
    assert "accepted forms" in str(caught.value)


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:8080/v1\x01",
        "http://gpu\x7fbox:11434",
        "http://gpu\tbox:11434",
        "http://gpu\xa0box:11434",
        "http://gpu box:11434",
        "http://gpü.example:11434/v1",
        "http://[::1]:11434",
        "http://127.0.0.1:8080/v1#part",
    ],
)
@pytest.mark.parametrize("backend", ["ollama", "openai"])
async def test_a_spec_that_parses_builds_a_backend(backend: str, base_url: str) -> None:
    """What the one reader of the grammar accepts, a judge can be built for (a service
    answers a 422 naming the spec, never a 500 when it builds the judge); what no client
    can ask is refused there, naming the accepted forms."""
    from judge.backends import build_backend

    try:
        spec = parse_judge_spec(f"{backend}:m@{base_url}")
    except JudgeSpecError:
        return  # refused where specs are read, naming the forms (the test above)
    judge = build_backend(spec)
    await judge.aclose()


def test_recorded_specs_are_split_without_validation() -> None:
    assert split_spec("ollama:qwen3:8b") == ("ollama", "qwen3:8b", None)
    assert split_spec("openai:m@http://h/v1") == ("openai", "m", "http://h/v1")
    assert split_spec("nonsense") == ("nonsense", "", None)


def test_panels_list_each_valid_judge_once() -> None:
    assert parse_panel(" ollama:a , openai:b@http://h ,") == ["ollama:a", "openai:b@http://h"]
    with pytest.raises(JudgeSpecError, match="each judge once"):
        parse_panel("ollama:a,ollama:a")
    with pytest.raises(JudgeSpecError, match="unknown judge backend"):
        parse_panel("ollama:a,vllm:b")
    # its gradings record the members' specs joined as the model: 256 characters at most
    with pytest.raises(JudgeSpecError, match="256 characters together"):
        parse_panel(",".join(f"ollama:{n}{'m' * 60}" for n in range(5)))


@pytest.mark.parametrize(
    "panel",
    [
        "openai:local@http://127.0.0.1:9/v1,OpenAI:local@http://127.0.0.1:9/v1",
        "openai:local@http://127.0.0.1:9/v1,openai:local@http://127.0.0.1:9/v1/",
        "openai:local,openai: local",
    ],
)
def test_a_panel_lists_each_judge_once_however_it_is_spelled(panel: str) -> None:
    """One judge written two ways (its backend's case, a trailing slash on its URL, a
    blank before its model) is still one judge: a panel listing it twice is refused, so
    no judge's votes count twice in the majority."""
    with pytest.raises(JudgeSpecError, match="each judge once"):
        parse_panel(panel)


def test_a_spec_or_model_longer_than_a_grading_records_is_refused() -> None:
    with pytest.raises(JudgeSpecError, match="model name holds at most 256"):
        parse_judge_spec("ollama:" + "m" * 257)
    with pytest.raises(JudgeSpecError, match="spec holds at most 512"):
        parse_judge_spec("openai:m@http://h/" + "p" * 500)
    assert parse_judge_spec("ollama:" + "m" * 256).model == "m" * 256


def test_member_specs_and_identity_of_one_judge_and_of_a_panel() -> None:
    panel = panel_spec(["ollama:a@http://h:1", "openai:b"])
    assert panel == "panel:ollama:a@http://h:1,openai:b"
    assert member_specs(panel) == ["ollama:a@http://h:1", "openai:b"]
    assert member_specs("ollama:a") == ["ollama:a"]
    assert judge_identity(panel) == "panel:ollama:a,openai:b"
    assert judge_identity("OLLAMA:a@http://h:1") == "ollama:a"
    assert judge_identity("not a spec") == "not a spec"


def test_a_panel_is_found_by_its_members_names_whatever_their_base_urls() -> None:
    """A panel's pattern matches the specs its gradings record under any base URL and
    any spelling one judge may be written in, and no other panel's."""
    pattern = panel_spec_pattern("panel:openai:a@http://10.0.0.1:9/v1+ollama:q:8b")
    assert pattern is not None
    recorded = [
        "panel:openai:a@http://10.0.0.7:9/v1,ollama:q:8b@http://h:1",
        "panel:openai:a,ollama:q:8b",
        "panel:OpenAI: a @http://h/v1,ollama:q:8b",
    ]
    assert all(re.search(pattern, spec) for spec in recorded)
    others = [
        "panel:openai:ab@http://h/v1,ollama:q:8b",  # another model
        "panel:openai:a@b@http://h/v1,ollama:q:8b",  # model a@b
        "panel:ollama:q:8b,openai:a",  # another order
        "panel:openai:a,ollama:q:8b,openai:c",  # another member
        "panel:openai:a",  # not a URL "http://10.0.0.1:9/v1+ollama:q:8b"
    ]
    assert not any(re.search(pattern, spec) for spec in others)
    assert panel_spec_pattern("openai:a") is None
    one = panel_spec_pattern("panel:openai:llama+lora@http://h/v1")  # a + in a model name
    assert one is not None and re.search(one, "panel:openai:llama+lora@http://10.0.0.7/v1")


async def test_a_demo_judge_built_from_its_spec_keeps_no_prompt_it_answered() -> None:
    """A service's ``scripted:MODE`` judge answers for as long as the service runs: it
    must not hold every prompt it was sent (tests build their own, which do)."""
    from judge.backends import build_backend
    from judge.backends.scripted import ScriptedBackend
    from judge.calls import ChatMessage, JudgeRequest
    from judge.spec import parse_judge_spec

    judge = build_backend(parse_judge_spec("scripted:pass"))
    assert isinstance(judge, ScriptedBackend)
    request = JudgeRequest(
        messages=(ChatMessage(role="user", content="a long prompt " * 500),),
        reply_schema={"type": "object", "properties": {}},
    )
    for _ in range(3):
        assert (await judge.complete(request)).text == "{}"
    assert judge.requests == []
