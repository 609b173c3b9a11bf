"""Marking a judge qualified the way a calibration run does, for tests of the pass policy."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from api.service.qualification import judge_settings
from api.service.settings import Settings
from judge.rubric import Rubric
from judge.spec import judge_identity
from storage import Store
from storage.quality_tables import CalibrationRunRecord
from tests.support.keys import session_key

__all__ = ["qualify"]


async def qualify(
    engine: Engine, settings: Settings, rubric: Rubric, *, judge_digest: str | None = None
) -> None:
    """Store a qualifying calibration run of ``settings.judge`` on ``rubric`` (a made-up
    gold file) that measured ``judge_digest``: from then on the service counts that judge
    as qualified (while that model is behind its name)."""
    await Store(engine, key=session_key()).calibration.add_run(
        CalibrationRunRecord(
            judge_spec=judge_identity(settings.judge),
            judge_settings=judge_settings(settings),
            rubric_id=rubric.id,
            rubric_version=rubric.version,
            gold_name="gold.jsonl",
            gold_sha256="0" * 64,
            n=73,
            verdict_kappa=0.9,
            false_pass_rate=0.0,
            qualified=True,
            judge_digest=judge_digest,
        )
    )
