"""The compact reply format and positive wording with the real model.

The case is the one-line user-service port case of ``tests.support.submissions``: SmolLM2
answers it positively asked in about 290 compact tokens, which parse, so the polarity of
every answer is checked. (Asked positively about the longer case of the other real-model
tests it rambled past 320 and then 640 tokens in every run, greedy decoding being
deterministic, and the grading always ended ``reply_truncated``.)"""

from __future__ import annotations

from judge.backends.openai import OpenAIBackend
from judge.calls import SamplingParams
from judge.grader import Grader
from judge.rubric import Rubric
from tests.api.service.real_model.shared import (
    ONCE,
    REAL_MODEL_MARKS,
    assert_parsed_or_explicitly_unscored,
)
from tests.support.llama_server import LlamaServer
from tests.support.submissions import DIAGNOSIS, TRUTH

pytestmark = REAL_MODEL_MARKS

#: nine compact lines take about a hundred tokens; a model that rambles past this budget
#: is asked once more with twice as much, then unscored ``reply_truncated``: bounded at
#: 3 x 320 tokens instead of 3 x 1024 (the 135M model wrote to the limit in some runs)
COMPACT_PARAMS = SamplingParams(max_tokens=320)


async def test_a_compact_positively_asked_grading_with_the_real_server(
    real_backend: OpenAIBackend, rubric: Rubric, llama_server: LlamaServer
) -> None:
    """Issue 18: the compact format and positive wording reach a real model and come back
    parsed in the rubric's polarity, or explicitly unscored."""
    grader = Grader(
        real_backend,
        params=COMPACT_PARAMS,
        retry=ONCE,
        context_tokens=llama_server.n_ctx,
        reply_format="compact",
        ask_as="positive",
    )
    result = await grader.grade(rubric, TRUTH, DIAGNOSIS)
    assert_parsed_or_explicitly_unscored(result, rubric)
    positive = next(q.positive_text for q in rubric.questions if q.positive_text)
    assert positive in result.calls[0].request.messages[1].content
    for answer in result.answers:
        positive = rubric.question(answer.question_id).ask_as == "positive" or bool(
            rubric.question(answer.question_id).positive_text
        )
        assert answer.reasoning.startswith("[asked: ") is positive
