"""The drift canary and a model replaced behind the judge's name."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from sqlmodel import col

from api.judges.calibration import calibrate
from api.judges.canary import run_canary
from api.service.qualification import identity_of
from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.calibration import DEFAULT_GOLD
from storage.tables import AuditRecord
from tests.judges.test_canary import JUDGE, LabelledJudge


def _audited(engine: Engine, event: str) -> int:
    with Session(engine) as session:
        query = select(func.count()).where(col(AuditRecord.event) == event)
        return int(session.execute(query).scalar_one())


async def test_a_canary_does_not_demote_a_judge_whose_model_changed_since_its_run(
    engine: Engine, database_url: str
) -> None:
    """Calibrated on model A, qualified; model B replaces A behind the name, so the
    judge is provisional already. A canary run then demotes nothing and sends no
    ``judge.demoted``, and once A is back behind the name the judge is qualified
    again (no demotion pinned on A's run)."""
    judge = LabelledJudge()
    judge.digest = "sha256:model-a"
    settings = Settings(
        judge=JUDGE, database_url=database_url, canary_budget=12, judge_digest_seconds=0
    )
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        services = runtime.services
        outcome = await calibrate(services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name)
        assert outcome.run.qualified and outcome.run.judge_digest == "sha256:model-a"
        rubric = services.rubrics.current[settings.rubric]
        identity = identity_of(settings, JUDGE, rubric)

        async def qualified_now() -> bool:
            current = await services.store.judge_digests.current(JUDGE)
            return await services.store.calibration.is_qualified(
                **identity, current_digest=current.digest if current else None
            )

        assert await qualified_now()
        # another model behind the name, answering otherwise
        judge.digest, judge.drifted = "sha256:model-b", True
        await services.backends.digests.current(services.backends.get(JUDGE))
        assert _audited(engine, "judge.changed") == 1
        assert not await qualified_now()  # provisional already: another model
        run = await run_canary(services)
        assert run.judge_digest == "sha256:model-b"
        demotions = _audited(engine, "judge.demoted")
        # the model that qualified is back behind the name, answering as it did
        judge.digest, judge.drifted = "sha256:model-a", False
        await services.backends.digests.current(services.backends.get(JUDGE))
        back = await qualified_now()
    assert demotions == 0, "judge.demoted sent for a judge that was not qualified"
    assert back, "model A, qualified by the latest run, stays demoted by a canary of model B"


async def test_a_canary_run_records_the_fingerprint_of_the_judge_it_measured(
    engine: Engine, database_url: str
) -> None:
    """A canary run (``sre-judge judges canary``, a process of its own) of a judge known
    by its completions' ``system_fingerprint`` only keeps the model it measured, so a
    run of another model than the qualified one is told apart."""
    judge = LabelledJudge()
    judge.fingerprint = "fp_a"
    settings = Settings(
        judge=JUDGE, database_url=database_url, judge_digest_seconds=0, canary_budget=6
    )
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        run = await run_canary(runtime.services)
    assert run.scored > 0
    assert run.judge_digest == "fingerprint:fp_a"
