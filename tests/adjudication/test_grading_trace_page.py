"""The agent's trace on a grading's page: beside the diagnosis, escaped (never markup),
the answers' quotes marked where it contains them, each card saying whether its quote
is in the trace; shown only to who may read the grading."""

from __future__ import annotations

from typing import Any

from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, TRUTH, scripted_judge
from tests.web.conftest import sign_in

QUOTE = "sets USER_PORT=9999"
YES = {"D1-Q1", "D1-Q2", "D2-Q1", "D2-Q2", "D3-Q1", "D3-Q2", "D3-Q3"}
#: a trace whose tool output carries hostile markup beside the quoted text
HOSTILE_STEPS = [
    {"tool": "kubectl_get", "input": {"args": "pods -n hotel"}, "output": "user-service 0/1"},
    {
        "tool": "<b>describe</b>",
        "input": "deployment user-service",
        "output": "Env: the deployment sets USER_PORT=9999\n<script>alert('xss')</script>\n"
        "<img src=x onerror=alert(1)>",
    },
]


async def _submit(client: Any, headers: dict[str, str], trace: Any) -> dict[str, Any]:
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "trace": trace}
    response = await client.post("/v1/submissions?wait=10", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_the_trace_is_shown_escaped_with_the_quotes_marked(
    api_client: Any, tokens: Any
) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(YES, evidence=QUOTE))) as c:
        grading = await _submit(c, agent, HOSTILE_STEPS)
        await sign_in(c, adj)
        page = (await c.get(f"/gradings/{grading['id']}")).text
    trace = page.split('data-testid="trace"', 1)[1].split("</section>", 1)[0]
    assert trace.count('data-testid="trace-step"') == 2
    assert '<mark class="ev-traced" title="quoted by D1-Q1, D1-Q2' in trace
    assert f">{QUOTE}</mark>" in trace
    assert "<script>" not in trace and "&lt;script&gt;" in trace
    assert "<img" not in trace and "<b>" not in trace and "&lt;b&gt;describe" in trace
    assert "7 of 7 quoted answers" in trace
    card = page.split('id="q-D1-Q1"', 1)[1].split('<section class="card', 1)[0]
    assert 'data-testid="trace-check-D1-Q1">found in the agent&#39;s trace' in card


async def test_free_text_a_missing_quote_and_no_trace(api_client: Any, tokens: Any) -> None:
    agent, adj = await tokens("submitter"), await tokens("adjudicator", "Ada")
    reply = sregym_reply(YES, evidence=QUOTE)
    async with api_client(**scripted_judge(reply, reply)) as c:
        text = await _submit(c, agent, "$ kubectl get pods\n<i>nothing</i> about ports")
        bare = await _submit(c, agent, None)
        await sign_in(c, adj)
        text_page = (await c.get(f"/gradings/{text['id']}")).text
        bare_page = (await c.get(f"/gradings/{bare['id']}")).text
    assert 'data-testid="trace-text"' in text_page and "&lt;i&gt;nothing" in text_page
    assert 'ev-traced" title' not in text_page and "0 of 7 quoted answers" in text_page
    assert "NOT in the agent&#39;s trace" in text_page
    assert 'data-testid="no-trace"' in bare_page and "no trace to check" in bare_page


async def test_another_submitter_sees_no_trace(api_client: Any, tokens: Any) -> None:
    owner, other = await tokens("submitter"), await tokens("submitter", "Other")
    async with api_client(**scripted_judge(sregym_reply(YES, evidence=QUOTE))) as c:
        grading = await _submit(c, owner, HOSTILE_STEPS)
        await sign_in(c, other)
        response = await c.get(f"/gradings/{grading['id']}")
    assert response.status_code in (403, 404)
    assert "kubectl_get" not in response.text and "USER_PORT" not in response.text


async def test_a_trace_field_the_quote_merely_contains_is_not_marked(
    api_client: Any, tokens: Any
) -> None:
    """A trace field shorter than the judge's quote, which the quote merely contains, is
    not marked as the quote: marks agree with the check that none is in the trace."""
    quote = "the user-service pod restarts constantly after the rollout"
    steps = [{"tool": "kubectl_get", "input": "pods -n hotel", "output": "user-service pod"}]
    agent, adj = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(YES, evidence=quote))) as c:
        grading = await _submit(c, agent, steps)
        await sign_in(c, adj)
        page = (await c.get(f"/gradings/{grading['id']}")).text
    trace = page.split('data-testid="trace"', 1)[1].split("</section>", 1)[0]
    assert "0 of 7 quoted answers cite text found in the trace" in trace
    assert '<mark class="ev-traced" title=' not in trace
