"""An HTTP client on an app under test, in the test's own event loop.

Litestar's ``AsyncTestClient`` runs the app's lifespan and every request in a second
thread with its own event loop (a blocking portal), so a test paid for a thread, a
loop and two thread hops a request. ``AppClient`` drives the same ASGI application
through httpx's ASGI transport and Litestar's own lifespan context, in the loop the
test runs in: the app's workers and loops run beside the test as they run beside the
server's requests, and the objects a test takes from ``client.app.state`` belong to
its loop.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

import httpx
from litestar import Litestar

#: the host of the apps' URLs, as Litestar's test client names it
BASE_URL = "http://testserver.local"


class AppClient(httpx.AsyncClient):
    """``async with AppClient(app) as client``: the app started (lifespan), then
    requests to it; leaving stops the app after the client."""

    def __init__(self, app: Litestar, *, timeout: float = 30, **kwargs: Any) -> None:
        # Litestar types its ASGI callable more narrowly than httpx names the protocol; the
        # client is this machine, as a local user's requests are (anonymous use needs it)
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))  # type: ignore[arg-type]
        super().__init__(
            transport=transport,
            base_url=BASE_URL,
            timeout=timeout,
            # as Litestar's test client: its user agent, redirects followed
            headers={"user-agent": "testclient"},
            follow_redirects=True,
            **kwargs,
        )
        self.app = app
        self._lifespan: AbstractAsyncContextManager[None] | None = None

    async def __aenter__(self) -> AppClient:
        self._lifespan = self.app.lifespan()
        await self._lifespan.__aenter__()
        try:
            await super().__aenter__()
        except BaseException as error:
            await self._lifespan.__aexit__(type(error), error, error.__traceback__)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        try:
            await super().__aexit__(exc_type, exc_value, traceback)
        finally:
            lifespan, self._lifespan = self._lifespan, None
            if lifespan is not None:  # a server's shutdown, whatever the test raised
                await lifespan.__aexit__(None, None, None)
