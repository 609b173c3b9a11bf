"""Agreement at the service level: stored labels and regrades, the route and the command."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from api.adjudication.label_queries import LabelQueries
from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from api.regrade.flip_reads import read_pairs
from api.regrade.flips import flip_report
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from api.reports.agreement import build_agreement_report
from api.reports.agreement_queries import AgreementQueries
from api.reports.filters import ReportFilter
from storage import Store
from storage.tables import GradingRecord
from tests.storage.helpers import graded_result, sregym_rubric
from tests.support.gradings import FAIL_D3, add_many
from tests.support.in_process_cli import run_cli
from tests.support.keys import session_key
from tests.support.sregym_results import write_sregym_attempt
from tests.support.submissions import TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

QUESTIONS = [q.id for q in sregym_rubric().questions]


async def _label(store: Store, grading_id: str, author: str, verdict: str, **answers: bool) -> None:
    await LabelQueries(store.db).add(
        grading_id,
        question_ids=QUESTIONS,
        answers={k.replace("_", "-"): v for k, v in answers.items()},
        verdict=verdict,  # type: ignore[arg-type]
        author_id=author,
        author_name=author,
    )


async def _seed(engine: Engine) -> tuple[list[str], list[str]]:
    """Judge vs alice on verdicts is Wikipedia's table: 20, 5, 10, 15 (kappa 0.4)."""
    store = Store(engine, key=session_key())
    passes = await add_many(store, {"pass": 25}, agent="a")
    fails = await add_many(store, {"fail": 25}, agent="a")
    for i, grading_id in enumerate(passes):
        await _label(store, grading_id, "alice", "pass" if i < 20 else "fail", D1_Q1=i < 15)
    for i, grading_id in enumerate(fails):
        await _label(store, grading_id, "alice", "pass" if i < 10 else "fail", D1_Q1=True)
    for i, grading_id in enumerate(await add_many(store, {"pass": 10}, agent="b")):
        await _label(store, grading_id, "bob", "fail" if i < 2 else "pass")
        await _label(store, grading_id, "carol", "pass")  # agrees with bob on 8 of 10
    return passes, fails


async def test_judge_vs_human_verdicts_give_the_textbook_kappa(engine: Engine) -> None:
    await _seed(engine)
    store = Store(engine, key=session_key())
    only_a = ReportFilter(agent="a")
    pairs = await AgreementQueries(store.db).pairs(only_a, "judge_human", group_by=["judge"])
    verdicts = [(p.a, p.b) for p in pairs if p.question_id == "verdict"]
    assert len(verdicts) == 50
    assert {p.group for p in pairs} == {("openai:judge-model",)}
    humans = await AgreementQueries(store.db).pairs(ReportFilter(), "human_human")
    assert sorted((p.a, p.b) for p in humans) == [(False, True)] * 2 + [(True, True)] * 8
    assert await AgreementQueries(store.db).pairs(only_a, "human_human") == []
    assert await AgreementQueries(store.db).pairs(ReportFilter(), "judge_judge") == []


async def test_two_humans_agree_or_not_on_unscored_gradings_too(engine: Engine) -> None:
    """Humans decide the gradings the judge could not score: two adjudicators' labels on
    them count in human_human, not in judge_human (no judge answer to compare)."""
    store = Store(engine, key=session_key())
    ids = await add_many(store, {"unscored": 2}, agent="a")
    for i, grading_id in enumerate(ids):
        await _label(store, grading_id, "ada", "pass", D1_Q1=True)
        await _label(store, grading_id, "bob", "pass" if i == 0 else "fail", D1_Q1=True)
    queries = AgreementQueries(store.db)
    humans = await queries.pairs(ReportFilter(), "human_human")
    verdicts = sorted((p.a, p.b) for p in humans if p.question_id == "verdict")
    assert verdicts == [(True, False), (True, True)]
    assert sum(p.question_id == "D1-Q1" for p in humans) == 2
    assert await queries.pairs(ReportFilter(), "judge_human") == []


async def test_a_dimension_pools_its_questions_on_unscored_gradings_too(store: Store) -> None:
    """Two adjudicators label D1-Q1 and D1-Q2 of one graded and two unscored gradings:
    human_human's D1 row pools the six question pairs its question rows count, the
    unscored gradings' (no judge answers) with the graded one's."""
    ids = await add_many(store, {"pass": 1, "unscored": 2}, agent="hh")
    for grading_id in ids:
        await _label(store, grading_id, "ada", "pass", D1_Q1=True, D1_Q2=True)
        await _label(store, grading_id, "bob", "pass", D1_Q1=False, D1_Q2=True)
    report = await build_agreement_report(store, ReportFilter(agent="hh"), kinds=["human_human"])
    rows = {(r.level, r.item): r.agreement.n for r in report.kinds[0].rows}
    assert rows[("question", "D1-Q1")] == 3 and rows[("question", "D1-Q2")] == 3
    assert rows[("answers", "all")] == 6
    assert rows.get(("dimension", "D1")) == 6, rows


async def test_a_dimension_pools_the_questions_an_imported_sregym_checklist_left_out(
    store: Store, tmp_path: Path
) -> None:
    """An imported SREGym attempt whose checklist answered D1-Q1 only (its rubric version,
    ``sregym``, is no stored one: it reads with the rubric's current version): two
    adjudicators' labels on D1-Q1 and D1-Q2 both pool into D1."""
    checklist = [{"id": "D1-Q1", "answer": "Yes", "evidence": "USER_PORT", "confidence": "High"}]
    fixture = write_sregym_attempt(
        tmp_path, checklist, diagnosis="USER_PORT=9999 on user-service", ground_truth=TRUTH,
        success=False,
    )  # fmt: skip
    await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root), read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )  # fmt: skip
    [grading_id] = await store.db.run_read(
        lambda session: list(session.execute(select(col(GradingRecord.id))).scalars())
    )
    await _label(store, grading_id, "ada", "fail", D1_Q1=True, D1_Q2=True)
    await _label(store, grading_id, "bob", "fail", D1_Q1=True, D1_Q2=False)
    current = {"sregym-rca": sregym_rubric()}
    report = await build_agreement_report(
        store, ReportFilter(), kinds=["human_human"], current=current
    )
    rows = {(r.level, r.item): r.agreement.n for r in report.kinds[0].rows}
    assert rows[("question", "D1-Q2")] == 1
    assert rows.get(("dimension", "D1")) == 2, rows


async def test_judge_vs_judge_pairs_a_regrade_with_the_grading_it_replaces(
    engine: Engine,
) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 3, "fail": 2}, agent="a")
    target = RegradeTarget(sregym_rubric(), "openai:new@http://x/v1", "openai", "new", "shadow")
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    for claim in await store.queue.claim_pending("tests", limit=100, lease_seconds=60):
        assert await store.queue.complete(claim.grading_id, "tests", graded_result())
    pairs = await AgreementQueries(store.db).pairs(
        ReportFilter(), "judge_judge", group_by=["judge"]
    )
    verdicts = sorted((p.a, p.b) for p in pairs if p.question_id == "verdict")
    assert verdicts == [(False, True)] * 2 + [(True, True)] * 3
    assert {p.group for p in pairs} == {("openai:judge-model vs openai:new",)}
    assert len(pairs) == 5 * 10


async def _shadow_job(store: Store, model: str, passes: dict[str, bool]) -> str:
    """A shadow regrade by ``openai:model`` of every current grading, run to the end:
    the item of submission ``s`` passes when ``passes[s]``. Returns the job's id."""
    spec = f"openai:{model}@http://x/v1"
    target = RegradeTarget(sregym_rubric(), spec, "openai", model, "shadow")
    view = await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    for claim in await store.queue.claim_pending("tests", limit=100, lease_seconds=60):
        result = graded_result(None if passes[claim.submission_id] else FAIL_D3)
        assert await store.queue.complete(claim.grading_id, "tests", result)
    return view.job.id


async def test_two_shadow_regrades_are_each_measured_against_the_grading_they_regraded(
    engine: Engine,
) -> None:
    """A maintainer tries judge b, then judge c, each in a shadow regrade of the current
    gradings. Each regrade is measured against the grading it regraded, as its job's flip
    report (verdicts=judge) counts it: the report shows ``judge-model vs b`` and
    ``judge-model vs c``, never b against c, which no one asked about."""
    store = Store(engine, key=session_key())
    ids = await add_many(store, {"pass": 2, "fail": 2}, agent="a")

    def original_verdicts(session: Any) -> dict[str, bool | None]:
        found = (session.get(GradingRecord, grading_id) for grading_id in ids)
        return {g.submission_id: g.passed for g in found}

    original = await store.db.run_read(original_verdicts)
    # judge b passes everything; judge c agrees with the original judge on every verdict
    await _shadow_job(store, "b", dict.fromkeys(original, True))
    job_c = await _shadow_job(store, "c", {s: bool(p) for s, p in original.items()})

    flips = flip_report({"id": job_c}, await read_pairs(store.db, job_c), verdicts="judge")
    assert (flips["agreement"]["verdicts"]["n"], flips["agreement"]["verdicts"]["kappa"]) == (
        4,
        1.0,
    )
    report = await build_agreement_report(
        store, ReportFilter(agent="a"), kinds=["judge_judge"], group_by=["judge"]
    )
    verdicts = {r.group["judge"]: r.agreement for r in report.kinds[0].rows if r.level == "verdict"}
    assert sorted(verdicts) == ["openai:judge-model vs openai:b", "openai:judge-model vs openai:c"]
    against_c = verdicts["openai:judge-model vs openai:c"]
    assert (against_c.n, against_c.kappa) == (4, 1.0)  # as the flip report counts job c
    assert verdicts["openai:judge-model vs openai:b"].n == 4


async def test_route_gives_kappa_with_interval_per_level(
    api_client: Any, engine: Engine, tokens: Any
) -> None:
    await _seed(engine)
    async with api_client(start_workers=False) as client:
        headers = await tokens("adjudicator")
        response = await client.get(
            "/v1/stats/agreement?kind=judge_human&group_by=rubric&agent=a", headers=headers
        )
        assert response.status_code == 200, response.text
        [part] = response.json()["kinds"]
        verdict = next(r for r in part["rows"] if r["level"] == "verdict")
        figures = verdict["agreement"]
        assert figures["n"] == 50 and figures["accuracy"] == 0.7
        assert figures["kappa"] == pytest.approx(0.4)
        assert figures["kappa_interval"]["low"] == pytest.approx(0.1511, abs=1e-4)
        assert figures["kappa_interval"]["high"] == pytest.approx(0.6489, abs=1e-4)
        assert figures["confusion"] == {"yes->yes": 20, "yes->no": 5, "no->yes": 10, "no->no": 15}
        assert verdict["group"]["rubric"].startswith("sregym-rca@")
        q = next(r for r in part["rows"] if r["item"] == "D1-Q1")
        assert q["agreement"]["confusion"] == {
            "yes->yes": 40, "yes->no": 10, "no->yes": 0, "no->no": 0,
        }  # fmt: skip
        bad = await client.get("/v1/stats/agreement?kind=nope", headers=headers)
        assert bad.status_code == 422 and "kind" in bad.text
        submitter = await client.get("/v1/stats/agreement", headers=await tokens("submitter"))
        assert submitter.status_code == 403


async def test_report_agreement_prints_kappa_with_ci(database_url: str, engine: Engine) -> None:
    await _seed(engine)
    table = run_cli(
        database_url, "report", "agreement", "--kind", "judge_human", "--agent", "a",
        "--format", "table",
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    line = next(row for row in table.stdout.splitlines() if "verdict" in row)
    assert "50" in line and "0.400" in line and "0.151–0.649" in line
    csv = run_cli(database_url, "report", "agreement", "--format", "csv", "--group-by", "judge")
    assert csv.returncode == 0, csv.stderr
    header, *rows = csv.stdout.splitlines()
    assert header.startswith("kind,judge,level,item,n,accuracy,accuracy_ci_low,")
    # one adjudicator always said yes: kappa is undefined and says why, never 0 with a 0-0 CI
    assert any(
        r.startswith("human_human,openai:judge-model,verdict,verdict,10,0.8,0.49")
        and ",0.943317848545624" in r
        and ",,,,,8,0,2,0," in r
        and r.endswith(",one category only: rater b always said yes")
        for r in rows
    )
    bad = run_cli(database_url, "report", "agreement", "--kind", "nope")
    assert bad.returncode == 2


async def test_the_agreement_table_and_csv_give_accuracy_with_its_wilson_interval(
    database_url: str, engine: Engine
) -> None:
    """Every figure a user sees comes with its interval: the judge agreed with alice on
    35 of 50 verdicts, accuracy 0.700 with Wilson's 95% interval 0.562 to 0.809, in the
    terminal as one column beside the accuracy and in the CSV as two."""
    await _seed(engine)
    query = ("report", "agreement", "--kind", "judge_human", "--agent", "a", "--format")
    table = run_cli(database_url, *query, "table")
    assert table.returncode == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if line.startswith("kind"))
    assert "accuracy 95% CI" in header and "kappa 95% CI" in header
    line = next(row for row in table.stdout.splitlines() if " verdict " in row)
    assert "0.700" in line and "0.562–0.809" in line
    done = run_cli(database_url, *query, "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    [verdict] = [r for r in rows if r["level"] == "verdict"]
    assert float(verdict["accuracy"]) == 0.7
    low, high = float(verdict["accuracy_ci_low"]), float(verdict["accuracy_ci_high"])
    assert (low, high) == (pytest.approx(0.5625, abs=1e-4), pytest.approx(0.8090, abs=1e-4))


async def test_overrides_count_as_human_labels(
    api_client: Any, engine: Engine, tokens: Any
) -> None:
    [grading_id] = await add_many(Store(engine, key=session_key()), {"pass": 1}, agent="o")
    async with api_client(start_workers=False) as client:
        headers = await tokens("adjudicator")
        etag = (await client.get(f"/v1/gradings/{grading_id}", headers=headers)).headers["ETag"]
        overridden = await client.post(
            f"/v1/gradings/{grading_id}/overrides",
            json={"question_id": "D2-Q2", "answer": "no", "reason": "not characterised"},
            headers={**headers, "If-Match": etag},
        )
        assert overridden.status_code in (200, 201), overridden.text
        report = await client.get(
            "/v1/stats/agreement?kind=judge_human&source=override&agent=o", headers=headers
        )
        rows = report.json()["kinds"][0]["rows"]
        assert [(r["level"], r["item"]) for r in rows] == [
            ("question", "D2-Q2"), ("dimension", "D2"), ("answers", "all"),
        ]  # fmt: skip
        assert rows[0]["agreement"]["confusion"]["yes->no"] == 1
        blind = await client.get(
            "/v1/stats/agreement?kind=judge_human&source=blind&agent=o", headers=headers
        )
        assert blind.json()["kinds"][0]["rows"] == []


async def test_a_withdrawn_override_no_longer_counts_and_a_blind_label_still_does(
    api_client: Any, engine: Engine, service_key: Any
) -> None:
    """Withdrawing an override takes the judgement back ("I misread it"): it no longer
    counts as a human label, while the same human's blind label of that grading does."""
    store = Store(engine, key=service_key)
    [grading_id] = await add_many(store, {"pass": 1}, agent="w")
    plaintext, token = await store.tokens.create(name="Ada", role="adjudicator")
    await _label(store, grading_id, token.id, "pass", D1_Q1=True)
    headers = {"Authorization": f"Bearer {plaintext}"}
    async with api_client(start_workers=False) as client:
        url = f"/v1/gradings/{grading_id}"
        etag = (await client.get(url, headers=headers)).headers["ETag"]
        overridden = await client.post(
            f"{url}/overrides",
            json={"verdict": "fail", "reason": "misread the port"},
            headers={**headers, "If-Match": etag},
        )
        assert overridden.status_code == 201, overridden.text
        query = "/v1/stats/agreement?kind=judge_human&agent=w&source="
        counted = (await client.get(query + "override", headers=headers)).json()
        withdrawn = await client.post(
            f"{url}/overrides",
            json={"withdraw": overridden.json()["overrides"][0]["id"], "reason": "I misread it"},
            headers={**headers, "If-Match": overridden.headers["ETag"]},
        )
        assert withdrawn.status_code == 201, withdrawn.text
        after = (await client.get(query + "override", headers=headers)).json()
        both = (await client.get(query + "all", headers=headers)).json()

    def verdict_n(report: dict[str, Any]) -> int:
        rows = report["kinds"][0]["rows"]
        return sum(r["agreement"]["n"] for r in rows if r["level"] == "verdict")

    assert (verdict_n(counted), verdict_n(after)) == (1, 0)
    assert verdict_n(both) == 1  # the blind label stands: the override's was later, gone


async def _labelled_by_ada(engine: Engine) -> None:
    store = Store(engine, key=session_key())
    ids = await add_many(store, {"pass": 3, "fail": 3}, agent="a")
    for i, grading_id in enumerate(ids):
        await LabelQueries(store.db).add(
            grading_id,
            question_ids=QUESTIONS,
            answers={"D1-Q1": i % 2 == 0},
            verdict="pass" if i < 4 else "fail",
            author_id="ada",
            author_name="ada",
        )


async def test_a_repeated_kind_or_group_is_read_once_by_the_command_as_by_the_route(
    api_client: Any, tokens: Any, database_url: str, engine: Engine
) -> None:
    """A kind or group named twice is read once, on the command as on the route (and so
    with ``--server``): each section and each row once, so a sum of ``n`` counts each
    label once."""
    await _labelled_by_ada(engine)
    async with api_client(start_workers=False) as client:
        answer = await client.get(
            "/v1/stats/agreement?kind=judge_human,judge_human&group_by=judge,judge",
            headers=await tokens("admin"),
        )
    assert answer.status_code == 200, answer.text
    served = answer.json()
    done = run_cli(
        database_url, "report", "agreement", "--kind", "judge_human,judge_human",
        "--group-by", "judge,judge", "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    local = json.loads(done.stdout)
    # the route: one judge_human section, grouped by judge once
    assert served["group_by"] == ["judge"] and len(served["kinds"]) == 1
    assert [k["kind"] for k in local["kinds"]] == ["judge_human"], [
        k["kind"] for k in local["kinds"]
    ]
    assert local["group_by"] == served["group_by"], local["group_by"]


async def test_the_agreement_csv_names_each_group_column_once(
    database_url: str, engine: Engine
) -> None:
    """A group named twice is one column of the CSV."""
    await _labelled_by_ada(engine)
    done = run_cli(
        database_url, "report", "agreement", "--kind", "judge_human",
        "--group-by", "judge,judge", "--format", "csv",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0].split(",")
    assert header.count("judge") == 1, header
