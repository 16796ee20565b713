"""The request-head deadline, on a real uvicorn server on 127.0.0.1 with raw sockets: a client
that dribbles its head is disconnected; whole requests, keep-alive and pipelining still work."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from gatehouse_contract.request_deadline import (
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    MAX_PIPELINED,
    with_head_deadline,
)

DEADLINE = 0.5
REQUEST = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n"


async def hello(request: Request) -> Response:
    return PlainTextResponse("hello")


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[int]:
    # A socket already listening: connections wait in its backlog until uvicorn accepts them.
    listening = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(
        Starlette(routes=[Route("/", hello)]),
        http=with_head_deadline(DEADLINE),
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        yield listening.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=5)
        listening.close()


async def read_answers(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    answers = []
    for _ in range(count):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=2)
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        answers.append(await reader.readexactly(length))
    return answers


async def closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    """Whether the server closed the connection (an end of file, a reset or a broken pipe)."""
    try:
        return await asyncio.wait_for(reader.read(), timeout=within) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


def test_a_dribbled_head_is_disconnected_at_the_deadline() -> None:
    async def scenario() -> tuple[int, bool]:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            # A byte every 0.1 s would hold the connection for ever without the deadline.
            sent = 0
            with contextlib.suppress(ConnectionError):
                for byte in REQUEST[:-1]:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    sent += 1
                    await asyncio.sleep(0.1)
            closed = await closed_by_server(reader, within=DEADLINE * 4)
            writer.close()
            return sent, closed

    sent, closed = asyncio.run(scenario())
    assert closed
    assert sent < len(REQUEST) - 1  # cut off half-way, not after the client gave up


def test_an_idle_keep_alive_connection_gets_the_deadline_again() -> None:
    async def scenario() -> tuple[list[bytes], bool]:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REQUEST)
            first = await read_answers(reader, 1)
            writer.write(b"GET / HT")  # the start of a second head, never finished
            closed = await closed_by_server(reader, within=DEADLINE * 4)
            writer.close()
            return first, closed

    first, closed = asyncio.run(scenario())
    assert first == [b"hello"]
    assert closed


def test_each_head_has_its_whole_deadline_from_when_it_is_awaited() -> None:
    """A kept-alive connection's later head is cut at its own deadline, counted from the answer
    before it, not at the first head's (the connection's one timer moves on)."""

    async def scenario() -> tuple[bool, bool]:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.sleep(DEADLINE * 0.6)
            writer.write(REQUEST)
            await read_answers(reader, 1)
            writer.write(b"GET / HT")  # awaited since the answer: due DEADLINE after it
            early = await closed_by_server(reader, within=DEADLINE * 0.7)
            closed = await closed_by_server(reader, within=DEADLINE * 4)
            writer.close()
            return early, closed

    early, closed = asyncio.run(scenario())
    assert not early
    assert closed


def test_whole_requests_keep_alive_and_pipelining_are_served() -> None:
    async def scenario() -> list[bytes]:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REQUEST + REQUEST)  # pipelined
            answers = await read_answers(reader, 2)
            await asyncio.sleep(DEADLINE * 0.6)
            writer.write(REQUEST)
            answers += await read_answers(reader, 1)
            writer.close()
            return answers

    assert asyncio.run(scenario()) == [b"hello"] * 3


async def _answer_to(head_parts: list[bytes]) -> bytes:
    """What the server answers to a head sent in these reads, up to when it closes."""
    async with serving() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answer = b""
        for part in head_parts:
            writer.write(part)
            await writer.drain()
            # A pause between parts, so each is a read of its own; an answer ends the sending.
            with contextlib.suppress(TimeoutError):
                answer = await asyncio.wait_for(reader.read(1), timeout=0.05)
                break
        answer += await asyncio.wait_for(reader.read(), timeout=5)
        writer.close()
        return answer


def test_a_head_larger_than_h11_allowed_is_refused() -> None:
    many = b"".join(b"a%d: b\r\n" % i for i in range(MAX_HEADERS + 1))
    long_value = b"X-Big: " + b"v" * MAX_HEAD_BYTES + b"\r\n"
    cases = {
        "many small headers": [b"GET / HTTP/1.1\r\nHost: t\r\n" + many + b"\r\n"],
        "one long value": [b"GET / HTTP/1.1\r\nHost: t\r\n" + long_value + b"\r\n"],
        "a long url": [b"GET /" + b"u" * MAX_HEAD_BYTES + b" HTTP/1.1\r\nHost: t\r\n\r\n"],
        # A value gathered over many reads is refused before it is whole.
        "a value in many reads": [b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: "]
        + [b"v" * 8192] * 64
        + [b"\r\n\r\n"],
    }
    for name, parts in cases.items():
        answer = asyncio.run(_answer_to(parts))
        assert answer.startswith(b"HTTP/1.1 400 "), (name, answer[:80])


def test_a_head_within_the_limit_is_served() -> None:
    value = b"X-Fine: " + b"v" * (MAX_HEAD_BYTES // 2) + b"\r\n"
    answer = asyncio.run(
        _answer_to([b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + value + b"\r\n"])
    )
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_pipelined_requests_past_the_bound_close_the_connection() -> None:
    async def scenario() -> tuple[int, bool]:
        async with serving() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            # Thousands of heads in one write: without the bound each became a queued request.
            writer.write(REQUEST * 2000)
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), timeout=5)
            writer.close()
            return data.count(b"hello"), data.endswith(b"Invalid HTTP request received.")

    answered, refused = asyncio.run(scenario())
    assert answered <= MAX_PIPELINED + 1
    assert refused
