"""A process stops its background loops whatever they were doing when the stop came.

Each loop (the import runner, the regrade batch runner, webhook delivery) waits for its
wake event with a timeout between rounds. A stop that comes just as the event is set
must still end the loop: on CPython 3.11, ``asyncio.wait_for`` returns the result of a
wait that completes as the cancellation arrives and the cancellation is lost, so a
loop waiting that way went round again and the stop, and with it ``serve``'s drain,
waited for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from sqlalchemy.engine import Engine

from api.imports.job_queries import ImportJobQueries
from api.service.background import BackgroundTask, cancel_and_wait
from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.backends.scripted import ScriptedBackend

JUDGE = "scripted:pass"


def _events(runtime: Runtime) -> dict[str, Callable[[], None]]:
    waiters = runtime.services.waiters
    return {
        "imports": waiters.imports.set,
        "batches": waiters.batches.set,
        "webhooks": runtime.webhooks._wake.set,
    }


@pytest.mark.parametrize("loop", ["imports", "batches", "webhooks"])
async def test_a_loop_woken_as_it_is_stopped_stops(
    engine: Engine, database_url: str, loop: str
) -> None:
    settings = Settings(judge=JUDGE, database_url=database_url, workers=1)
    judges = {JUDGE: ScriptedBackend.for_mode("pass")}
    runtime = Runtime(settings, engine=engine, backends=judges, workers=True, import_jobs=True)
    async with runtime:
        await asyncio.sleep(0.3)  # every loop has looked once and waits for its event
        stops = {
            "imports": runtime.imports.stop,
            "batches": runtime.batches.stop,
            "webhooks": runtime.webhooks.stop,
        }
        _events(runtime)[loop]()  # woken, and stopped before it ran again
        async with asyncio.timeout(10):
            await stops[loop]()


async def test_a_stop_ends_a_task_that_lost_its_first_cancellation() -> None:
    """Whatever swallows a cancellation on the way (a library, a race), the stop cancels
    again until the task has ended."""
    rounds = 0

    class Stubborn(BackgroundTask):
        async def _loop(self) -> None:
            nonlocal rounds
            while True:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    rounds += 1
                    if rounds == 1:
                        continue  # the first one is lost
                    raise

    task = Stubborn()
    task.start()
    await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await task.stop()
    assert rounds == 2


async def test_cancel_and_wait_raises_what_the_task_raised() -> None:
    async def failing() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            raise RuntimeError("tidying up failed")

    task = asyncio.create_task(failing())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="tidying up failed"):
        await cancel_and_wait(task)


async def test_a_part_that_fails_to_stop_does_not_keep_the_others_running(
    engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database error while the import runner gives its jobs back at shutdown is raised,
    but only after the grading workers, the other loops and the judges' clients have
    stopped: a process never exits with work still being claimed."""
    settings = Settings(judge=JUDGE, database_url=database_url, workers=1)
    judges = {JUDGE: ScriptedBackend.for_mode("pass")}
    runtime = Runtime(settings, engine=engine, backends=judges, workers=True, import_jobs=True)

    async def broken(*_: object) -> list[str]:
        raise RuntimeError("database gone")

    monkeypatch.setattr(ImportJobQueries, "release_all", broken)
    await runtime.start()
    await asyncio.sleep(0.2)
    with pytest.raises(RuntimeError, match="database gone"):
        await runtime.stop()
    assert runtime.workers.stopping and runtime.workers._dispatcher is None
    for loop in (runtime.canary, runtime.batches, runtime.webhooks):
        assert loop._task is None or loop._task.done()
