"""``sre-judge report`` and ``sre-judge export`` as a user runs them (in process)."""

from __future__ import annotations

import ast
import csv
import io
import json
import xml.dom.minidom
from pathlib import Path

import httpx
import matplotlib.image
import pytest
import respx
from click.testing import CliRunner
from sqlalchemy.engine import Engine

import storage.attempts
from api.cli.main import main
from api.http.problems import ApiProblem
from api.reports.filters import ReportFilter
from api.reports.params import arm_filters
from api.reports.rates import pass_rate_report
from api.reports.tables import pass_rate_table
from api.tabular import write_csv
from storage import Store
from tests.support.attempts import seed_attempts
from tests.support.gradings import add_grading, add_many
from tests.support.in_process_cli import cli_in_process, run_cli
from tests.support.keys import session_key

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


async def _seed(engine: Engine) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 19, "fail": 8, "unscored": 1}, agent="plain")
    await add_many(store, {"pass": 21, "fail": 6, "pending": 1}, agent="think")


async def test_reports_as_table_json_csv_and_charts(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    await _seed(engine)
    png = tmp_path / "rates.png"
    table = run_cli(
        database_url, "report", "pass-rates", "--group-by", "agent", "--chart", str(png),
        "--format", "table", "--inline", "include",
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    plain = next(line for line in table.stdout.splitlines() if "plain" in line)
    assert "27" in plain and "0.704" in plain and "0.515–0.841" in plain
    assert "unscored, pending and held" in table.stdout
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    pixels = matplotlib.image.imread(png)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100

    svg = tmp_path / "compare.svg"
    compare = run_cli(
        database_url, "report", "compare", "-a", "agent=think", "-b", "agent=plain",
        "-a", "inline=include", "-b", "inline=include", "--format", "json", "--chart", str(svg),
    )  # fmt: skip
    assert compare.returncode == 0, compare.stderr
    report = json.loads(compare.stdout)
    assert (report["a"]["outcome"]["passed"], report["b"]["outcome"]["passed"]) == (21, 19)
    assert report["a"]["outcome"]["n"] == report["b"]["outcome"]["n"] == 27
    difference = report["difference"]
    assert difference["interval"]["low"] < 0 < difference["interval"]["high"]
    assert svg.read_text().lstrip().startswith("<?xml")


async def test_the_charts_count_the_same_n_as_the_tables(engine: Engine) -> None:
    """What ``--chart`` draws beside ``k/n`` is the n of the table's rows, group by group."""
    from api.reports.charts import question_bars, rate_bars
    from api.reports.rates import question_report
    from api.reports.tables import question_table

    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 1}, agent="one")  # n = 1 as well as larger groups
    await _seed(engine)
    mixed = ReportFilter(inline="include")  # the seeded ground truths are inline ones
    rates = await pass_rate_report(store, mixed, group_by=["agent"])
    table = pass_rate_table(rates)
    n = table.columns.index("n")
    in_table = {row[0]: row[n] for row in table.rows if row[0] != "(all)"}
    drawn = {bar.label: bar.n for bar in rate_bars(rates.groups)}
    assert drawn == in_table and drawn["one"] == 1
    assert {bar.successes for bar in rate_bars(rates.groups) if bar.label == "one"} == {1}
    questions = await question_report(store, mixed)
    q_table = question_table(questions)
    q, qn = q_table.columns.index("question"), q_table.columns.index("n")
    assert [bar.n for bar in question_bars(questions.questions)] == [r[qn] for r in q_table.rows]
    assert [bar.label for bar in question_bars(questions.questions)] == [r[q] for r in q_table.rows]


async def test_the_chart_legend_names_the_bars_of_provisional_verdicts(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A rate counting verdicts made while its judge was provisional is drawn apart, and
    the legend says what each kind of bar is; without such a rate, no legend."""
    from api.reports.charts import PROVISIONAL_LABEL, QUALIFIED_LABEL

    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 5, "fail": 2}, agent="qualified")
    await add_many(store, {"pass": 3, "fail": 4}, agent="trial", provisional=True)
    mixed = tmp_path / "mixed.svg"
    done = run_cli(
        database_url, "report", "pass-rates", "--group-by", "agent", "--inline", "include",
        "--format", "json", "--chart", str(mixed),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    svg = mixed.read_text()
    assert PROVISIONAL_LABEL in svg and QUALIFIED_LABEL in svg
    assert "made while the judge was provisional" in PROVISIONAL_LABEL

    plain = tmp_path / "plain.svg"
    done = run_cli(
        database_url, "report", "pass-rates", "--agent", "qualified", "--inline", "include",
        "--format", "json", "--chart", str(plain),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert PROVISIONAL_LABEL not in plain.read_text()


async def test_report_csv_has_a_header_and_full_precision(engine: Engine) -> None:
    await _seed(engine)
    mixed = ReportFilter(inline="include")  # the seeded ground truths are inline ones
    report = await pass_rate_report(Store(engine, key=session_key()), mixed, group_by=["agent"])
    out = io.StringIO()
    write_csv(pass_rate_table(report), out)
    rows = {row["agent"]: row for row in csv.DictReader(io.StringIO(out.getvalue()))}
    plain = rows["plain"]
    assert (plain["passed"], plain["n"], plain["unscored"]) == ("19", "27", "1")
    assert round(float(plain["ci_low"]), 3) == 0.515
    assert round(float(plain["ci_high"]), 3) == 0.841
    assert rows["(all)"]["n"] == "54" and rows["(all)"]["pending"] == "1"


async def test_export_jsonl_csv_and_sregym(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    store = Store(engine, key=session_key())
    await add_grading(store, "pass", agent="a", scenario_id="hotel/port", attempt=1)
    await add_grading(store, "fail", agent="a", scenario_id="hotel/port", attempt=2)
    await add_grading(store, "unscored", agent="b", metadata={"problem_id": "k8s/dns"})

    sregym_file = tmp_path / "sregym.csv"
    done = run_cli(database_url, "export", "--format", "sregym", "--output", str(sregym_file))
    assert done.returncode == 0, done.stderr
    assert "3 gradings exported" in done.stderr
    rows = list(csv.DictReader(sregym_file.open(encoding="utf-8", newline="")))
    for column in (
        "problem_id",
        "attempt",
        "Diagnosis.success",
        "Diagnosis.composite_score",
        "Diagnosis.dimensions",
        "Diagnosis.checklist",
        "Diagnosis.judgment",
        "Diagnosis.submission",
    ):
        assert column in rows[0], column
    first, second, third = rows
    assert (first["problem_id"], first["attempt"], first["Diagnosis.success"]) == (
        "hotel/port",
        "1",
        "True",
    )
    assert float(first["Diagnosis.composite_score"]) == 1.0
    dimensions = ast.literal_eval(second["Diagnosis.dimensions"])
    assert dimensions["D3"] == {"name": "Failure scope", "score": 0.0}
    checklist = ast.literal_eval(second["Diagnosis.checklist"])
    assert checklist[0] == {
        "id": "D1-Q1",
        "answer": "Yes",
        "evidence": "checkout",
        "confidence": "High",
    }
    assert second["Diagnosis.success"] == "False" and second["Diagnosis.judgment"] == "False"
    # an inline ground truth: the id its metadata claims, marked as not a registered one
    assert third["problem_id"] == "inline:k8s/dns" and third["Diagnosis.success"] == ""

    plain = run_cli(database_url, "export", "--format", "csv", "--agent", "a")
    assert plain.returncode == 0, plain.stderr
    plain_rows = list(csv.DictReader(io.StringIO(plain.stdout)))
    assert [r["passed"] for r in plain_rows] == ["True", "False"]
    assert plain_rows[1]["D3-Q1"] == "no" and plain_rows[1]["D1-Q1.judge"] == "yes"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "compare", "-a", "colour=red", "-b", "agent=x"], "colour=red"),
        (["report", "compare", "-a", "agent=x"], "give at least one FIELD=VALUE"),
        # a choice the server refuses (422) is refused here too, not ignored
        (["report", "compare", "-a", "include=bogus", "-b", "agent=x"], "one of shadow"),
        (["report", "compare", "-a", "inline=zzz", "-b", "agent=x"], "one of apart, include"),
        (["report", "compare", "-a", "agent=x", "-b", "provisional=zzz"], "include, exclude"),
        (["report", "pass-rates", "--group-by", "agent,colour"], "'colour' is not one of"),
        (["report", "pass-rates", "--chart", "rates.gif"], ".png or .svg"),
        (["export", "--format", "xml"], "'xml' is not one of"),
    ],
)
def test_usage_errors_exit_2_before_touching_the_database(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args, env={"SRE_JUDGE_DATABASE_URL": "sqlite:///nowhere"})
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.parametrize("agent", ["$\\foo$", "$x^{2}$", "a $ and $ b"])
async def test_an_agent_name_with_dollar_signs_is_charted_as_written(
    database_url: str, engine: Engine, tmp_path: Path, agent: str
) -> None:
    """An agent's name is submitter text: matplotlib would read ``$...$`` as a formula
    (``$\\foo$`` an unknown symbol that stopped the chart); it is drawn as written."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 2, "fail": 1}, agent="plain")
    await add_many(store, {"pass": 1, "fail": 1}, agent=agent)
    png = tmp_path / "rates.png"
    done = run_cli(
        database_url, "report", "pass-rates", "--group-by", "agent", "--chart", str(png),
        "--format", "json", "--inline", "include",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert png.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize("agent", ["evil\x1b]0;title\x07agent", "a\uffffb"])
async def test_an_svg_chart_of_an_agent_name_with_a_control_character_is_valid_svg(
    database_url: str, engine: Engine, tmp_path: Path, agent: str
) -> None:
    """An agent's name holding a control character (ESC, BEL) or a character XML allows
    nowhere still gives an SVG chart that is well-formed XML, which a browser shows."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 2, "fail": 1}, agent="plain")
    await add_many(store, {"pass": 1, "fail": 1}, agent=agent)
    svg = tmp_path / "rates.svg"
    done = run_cli(
        database_url, "report", "pass-rates", "--group-by", "agent", "--chart", str(svg),
        "--format", "json", "--inline", "include",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    xml.dom.minidom.parseString(svg.read_bytes())  # raises ExpatError if not well-formed


@pytest.mark.postgres  # the report's keyset query: on PostgreSQL too under --db all
def test_report_attempts_prints_every_pair_reading_page_by_page(
    database_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``report attempts`` reads the report page by page to its end: six tokens that each
    attempted 90 scenarios give 540 rows (CSV and JSON) over pages of 200, most attempts
    first, each pair once."""
    monkeypatch.setattr(storage.attempts, "MAX_PAGE", 200)
    session_key()  # the service key, made as ``serve`` makes it
    made = seed_attempts(engine, tokens=6, scenarios=90, attempts=lambda t, s: 1 + s % 4)
    expected = sorted(made.items(), key=lambda pair: (-pair[1], *pair[0]))
    as_csv = run_cli(database_url, "report", "attempts", "--format", "csv")
    as_json = run_cli(database_url, "report", "attempts", "--format", "json")
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [((r["token"], r["scenario"]), int(r["attempts"])) for r in rows] == expected
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    items = [((i["token_id"], i["scenario_id"]), i["attempts"]) for i in report["items"]]
    assert items == expected and report["next_cursor"] is None


def test_report_attempts_with_server_follows_next_cursor_to_the_end() -> None:
    """With ``--server``, ``report attempts`` asks for the next page with the cursor the
    server gave (and the same filters) until ``next_cursor`` is null, and prints them all."""
    period = {"since": "2026-01-01T00:00:00+00:00", "until": "2026-01-01T01:00:00+00:00"}

    def item(token: str) -> dict[str, object]:
        return {
            "token_id": token, "token_name": token, "role": "submitter", "scenario_id": "s1",
            "attempts": 1, "first_at": period["since"], "last_at": period["since"],
        }  # fmt: skip

    def page(request: httpx.Request) -> httpx.Response:
        later = request.url.params.get("cursor") == "page-2"
        items, after = ([item("t3")], None) if later else ([item("t1"), item("t2")], "page-2")
        body = {**period, "limit_per_hour": 20, "items": items, "next_cursor": after}
        return httpx.Response(200, json=body)

    with respx.mock(assert_all_called=True) as server:
        route = server.get("http://judge.test/v1/stats/attempts").mock(side_effect=page)
        done = cli_in_process(
            "report", "attempts", "--scenario", "s1", "--server", "http://judge.test",
            "--format", "json", env={"SRE_JUDGE_TOKEN": "admin-token"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [i["token_id"] for i in json.loads(done.stdout)["items"]] == ["t1", "t2", "t3"]
    asked = [dict(call.request.url.params) for call in route.calls]
    assert asked == [{"scenario_id": "s1"}, {"scenario_id": "s1", "cursor": "page-2"}]


def test_report_compare_with_server_sends_the_arms_the_server_reads() -> None:
    """With ``--server``, ``report compare`` sends each arm as the ``a.<field>`` /
    ``b.<field>`` parameters the server's own parser accepts, the given fields only."""
    arms: list[tuple[ReportFilter, ReportFilter]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        params = {k: request.url.params.get_list(k) for k in request.url.params}
        try:
            arms.append(arm_filters(params))
        except ApiProblem as exc:  # what the server answers
            body = {"title": "Invalid request", "detail": exc.detail, "status": 422}
            return httpx.Response(422, json=body)
        return httpx.Response(500, json={"title": "enough"})

    with respx.mock(assert_all_called=True) as server:
        route = server.get("http://judge.test/v1/stats/compare").mock(side_effect=answer)
        done = cli_in_process(
            "report", "compare", "-a", "model=m1", "-b", "model=m2", "-b", "inline=include",
            "--server", "http://judge.test", "--format", "json",
            env={"SRE_JUDGE_TOKEN": "adjudicator-token"},
        )  # fmt: skip
    assert "Invalid request" not in done.stderr, done.stderr
    assert dict(route.calls.last.request.url.params) == {
        "verdicts": "effective", "a.model": "m1", "b.model": "m2", "b.inline": "include",
    }  # fmt: skip
    assert arms == [(ReportFilter(model="m1"), ReportFilter(model="m2", inline="include"))]


async def test_report_times_take_what_the_api_takes(database_url: str, engine: Engine) -> None:
    """``--created-after``/``--created-before`` read ISO 8601 times as the API does: a
    ``Z``, an offset (converted to UTC), fractions of a second, a bare date, the
    calendar's ends; anything else is a usage error saying the form."""
    await _seed(engine)  # every grading made now
    counted = {}
    for after in ("2000-01-01", "2000-01-01T00:00:00Z", "2000-01-01T02:00:00.5+02:00"):
        answer = run_cli(
            database_url, "report", "pass-rates", "--created-after", after,
            "--inline", "include", "--format", "json",
        )  # fmt: skip
        assert answer.returncode == 0, (after, answer.stderr)
        counted[after] = json.loads(answer.stdout)["overall"]["n"]
    assert set(counted.values()) == {54}, counted  # the pending two are not counted
    before = run_cli(
        database_url, "report", "pass-rates", "--created-before", "2000-01-01T00:00:00+05:00",
        "--inline", "include", "--format", "json",
    )  # fmt: skip
    assert before.returncode == 0 and json.loads(before.stdout)["overall"]["n"] == 0
    bad = run_cli(database_url, "report", "attempts", "--created-after", "yesterday")
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr, bad.stderr
    zoned = run_cli(database_url, "report", "attempts", "--created-after", "2000-01-01T00:00Z")
    assert zoned.returncode == 0, zoned.stderr
    # the calendar's ends with an offset that leaves it read as the stored years' ends
    edges = run_cli(
        database_url, "report", "pass-rates", "--created-after", "0001-01-01T00:00:00+05:00",
        "--created-before", "9999-12-31T23:00:00-05:00", "--inline", "include",
        "--format", "json",
    )  # fmt: skip
    assert edges.returncode == 0 and json.loads(edges.stdout)["overall"]["n"] == 54, edges.stderr


@pytest.mark.parametrize("value", ["2024-01-01T00:00:00z", "2016-12-31T23:59:60Z"])
def test_report_times_take_every_rfc3339_form(
    database_url: str, engine: Engine, value: str
) -> None:
    """``--created-after`` takes every RFC 3339 date-time the API takes: a lower-case
    ``z``, a leap second."""
    session_key()  # the service key the command is run with (made on first use)
    done = run_cli(
        database_url, "report", "pass-rates", "--created-after", value, "--format", "json"
    )
    assert done.returncode == 0, done.stderr


async def test_a_group_named_twice_is_one_group_of_the_pass_rates(
    database_url: str, engine: Engine
) -> None:
    """``--group-by agent,agent`` groups by the agent once, as the route reads it."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 2, "fail": 1}, agent="a")
    once = run_cli(
        database_url, "report", "pass-rates", "--group-by", "agent", "--inline", "include",
        "--format", "json",
    )  # fmt: skip
    twice = run_cli(
        database_url, "report", "pass-rates", "--group-by", "agent, agent", "--inline",
        "include", "--format", "json",
    )  # fmt: skip
    assert once.returncode == twice.returncode == 0, twice.stderr
    assert json.loads(twice.stdout) == json.loads(once.stdout)
