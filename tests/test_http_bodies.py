"""The bound on bodies per address (groove/serve/http/bodies.py) counts only bodies still missing bytes.

In process, on the real BodyDeadline with an ASGI app that takes its time before it reads the body (as the
MCP app does under load, behind locks and other requests): whole bodies waiting in the server's buffer are
never cut, however many; bodies whose bytes have not come are cut beyond the bound, the one that waited
longest first. The real server under trickling connections is tests/test_http_limits.py's."""

from __future__ import annotations

from typing import Any

import anyio

from groove.serve.http.bodies import BODY_GRACE_S, BodyDeadline
from groove.serve.http.storm import StormLog

PER_CLIENT = 4


def scope(peer: str = "127.0.0.1") -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/mcp", "client": (peer, 40000),
            "headers": [(b"content-length", b"2")]}


async def app_reading_late(gate: anyio.Event, read: list[bytes]) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await gate.wait()  # busy with others before it reads this body
        message = await receive()
        read.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


async def run_requests(n: int, *, whole: bool, late_s: float = 0.0) -> tuple[list[bytes], list[int]]:
    gate = anyio.Event()
    read: list[bytes] = []
    statuses: list[int] = []
    layer = BodyDeadline(await app_reading_late(gate, read), 30.0, StormLog("test"), per_client=PER_CLIENT)
    never = anyio.Event()

    async def one() -> None:
        async def receive() -> Any:
            if not whole:
                await never.wait()  # the client sent the headers and not the body's bytes
            await anyio.sleep(late_s)  # a busy client's body, a while after its headers
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await layer(scope(), receive, send)

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
        await anyio.wait_all_tasks_blocked()
        gate.set()  # the app gets round to reading them all
        await anyio.sleep(BODY_GRACE_S + 0.2)  # bodies count against the bound once they have waited this long
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()  # the trickled ones that were not cut would wait out their deadline
    return read, statuses


async def test_whole_bodies_the_app_reads_late_are_never_cut_however_many_from_one_address():
    read, statuses = await run_requests(6 * PER_CLIENT, whole=True)
    assert statuses == [200] * (6 * PER_CLIENT) and read == [b"{}"] * (6 * PER_CLIENT)


async def test_bodies_still_missing_bytes_are_cut_beyond_the_bound_from_one_address():
    read, statuses = await run_requests(6 * PER_CLIENT, whole=False)
    assert read == [] and statuses == [408] * (5 * PER_CLIENT)  # the bound's worth are still waiting


async def test_whole_bodies_that_come_a_second_after_their_headers_are_never_cut_however_many_from_one_address():
    # 64 clients in one busy process, or a saturated server: each body comes whole, late (before: cut at once)
    read, statuses = await run_requests(6 * PER_CLIENT, whole=True, late_s=BODY_GRACE_S / 2)
    assert statuses == [200] * (6 * PER_CLIENT) and read == [b"{}"] * (6 * PER_CLIENT)
