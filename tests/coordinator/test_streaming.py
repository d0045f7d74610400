"""The coordinator's streaming reader, chunk assembly and update source."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from contracts.wire import (
    Artifact,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from coordinator.errors import ProtocolError, RemoteA2AError
from coordinator.remote.http.sse import SSEDecoder
from coordinator.remote.streaming import (
    ArtifactAssembler,
    ArtifactTooLarge,
    RemoteUpdates,
    TaskView,
)
from coordinator.remote.wire.client import A2AClient
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.remote_risk.conftest import risk_input
from tests.servers import free_port, running


def chunk(text: str, *, append: bool | None, last: bool | None, aid: str = "a1") -> Any:
    artifact = Artifact(artifact_id=aid, parts=[Part(text=text)])
    return TaskArtifactUpdateEvent(
        task_id="t", context_id="c", artifact=artifact, append=append, last_chunk=last
    )


def test_chunks_make_an_artifact_only_once_the_last_one_arrives() -> None:
    """A chunked artifact is withheld until lastChunk, then holds every part in order."""
    assembler = ArtifactAssembler()
    assert assembler.add(chunk("one ", append=False, last=False)) is None
    assert assembler.complete == {}
    whole = assembler.add(chunk("two", append=True, last=True))
    assert whole is not None
    assert [part.text for part in whole.parts] == ["one ", "two"]


def test_assembly_is_capped_while_chunks_arrive() -> None:
    """Chunks whose total exceeds the cap are refused before the artifact completes."""
    assembler = ArtifactAssembler(max_bytes=200)
    assembler.add(chunk("x" * 80, append=False, last=False))
    with pytest.raises(ArtifactTooLarge):
        assembler.add(chunk("y" * 80, append=True, last=False))


def test_task_view_folds_events_and_refuses_another_task() -> None:
    """Status and artifact events update the view; an event about another task is refused."""
    view = TaskView(Task(id="t", context_id="c", status=TaskStatus(state=TaskState.SUBMITTED)))
    working = TaskStatusUpdateEvent(
        task_id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING)
    )
    view.apply(StreamResponse(status_update=working))
    view.apply(StreamResponse(artifact_update=chunk("half", append=False, last=False)))
    assert view.task.status.state is TaskState.WORKING and view.task.artifacts is None
    view.apply(StreamResponse(artifact_update=chunk("done", append=True, last=True)))
    assert view.task.artifacts and len(view.task.artifacts[0].parts) == 2
    other = working.model_copy(update={"task_id": "other"})
    with pytest.raises(ProtocolError):
        view.apply(StreamResponse(status_update=other))


def test_sse_decoder_handles_split_lines_and_every_line_ending() -> None:
    """Events split across chunks, with CRLF, LF or CR endings and comments, decode whole."""
    decoder = SSEDecoder(max_event_bytes=1000)
    events = decoder.feed(b': comment\r\ndata: {"a"')
    events += decoder.feed(b":1}\r\n\r\ndata: x\n")
    events += decoder.feed(b"data: y\n\nevent: e\rdata: z\r")
    events += decoder.feed(b"\r\n")
    assert events == [b'{"a":1}', b"x\ny", b"z"]
    with pytest.raises(ProtocolError):
        SSEDecoder(max_event_bytes=10).feed(b"data: " + b"q" * 20 + b"\n")


@pytest.fixture
def risk_endpoint() -> Iterator[str]:
    port = free_port()
    settings = Settings(public_base_url=f"http://127.0.0.1:{port}", skill_delay_seconds=0.3)
    with running(create_app(settings), port=port):
        yield settings.jsonrpc_url


def message() -> Any:
    from contracts.wire import Message, Role

    return Message(
        message_id="m-stream",
        role=Role.USER,
        parts=[Part(data=risk_input(), media_type="application/json")],
    )


def test_client_reads_a_stream_and_raises_a_refusal(risk_endpoint: str) -> None:
    """stream_message yields parsed events to COMPLETED; subscribing to the finished task
    raises the server's -32004."""
    from contracts.wire import SendMessageRequest

    async def exchange() -> list[StreamResponse]:
        async with A2AClient() as client:
            events = [
                e
                async for e in client.stream_message(
                    risk_endpoint, SendMessageRequest(message=message())
                )
            ]
            task_id = events[0].task_id or ""
            with pytest.raises(RemoteA2AError) as refused:
                [e async for e in client.subscribe(risk_endpoint, task_id)]
            assert refused.value.code == -32004
            return events

    events = asyncio.run(exchange())
    assert events[0].task is not None
    last = events[-1].status_update
    assert last is not None and last.status.state is TaskState.COMPLETED


def test_a_stream_that_ends_early_is_followed_by_get_task(risk_endpoint: str) -> None:
    """When the update source ends before the task settles, the next observation comes
    from GetTask and later ones from polling."""
    from contracts.wire import SendMessageConfiguration, SendMessageRequest

    async def follow() -> tuple[Task, list[str]]:
        async with A2AClient() as client:
            request = SendMessageRequest(
                message=message(),
                configuration=SendMessageConfiguration(return_immediately=True),
            )
            task = (await client.send_message(risk_endpoint, request)).task
            assert task is not None

            async def cut_short() -> AsyncIterator[StreamResponse]:
                yield StreamResponse(task=task)

            updates = RemoteUpdates(client, risk_endpoint, task, {}, source=cut_short)
            observed = await updates.next(30)
            while observed.status.state is not TaskState.COMPLETED:
                observed = await updates.next(30)
            return observed, updates.notes

    observed, notes = asyncio.run(follow())
    assert observed.artifacts
    assert notes == ["the update stream ended before the task settled; polling instead"]


def _task(state: TaskState) -> Task:
    return Task(id="t", context_id="c", status=TaskStatus(state=state))


def _updates(client: A2AClient, state: TaskState, **options: Any) -> RemoteUpdates:
    """Updates of a task in ``state`` from a test source; GetTask would find no server."""
    return RemoteUpdates(client, "http://127.0.0.1:9/", _task(state), {}, **options)


def _status(state: TaskState) -> StreamResponse:
    update = TaskStatusUpdateEvent(task_id="t", context_id="c", status=TaskStatus(state=state))
    return StreamResponse(status_update=update)


async def _nothing() -> None:
    return None


def test_pending_facts_are_written_only_when_a_wait_is_not_short() -> None:
    """An update that arrives at once is read without calling on_idle; one that takes
    longer than the idle threshold calls it once, and the read is not lost meanwhile."""
    from coordinator.remote.streaming import IDLE_SECONDS

    async def source() -> AsyncIterator[StreamResponse]:
        yield _status(TaskState.WORKING)
        await asyncio.sleep(IDLE_SECONDS * 5)
        yield _status(TaskState.COMPLETED)

    async def follow() -> tuple[list[int], list[TaskState]]:
        idle_calls: list[int] = []

        async def idle() -> None:
            idle_calls.append(1)

        async with A2AClient() as client:
            updates = _updates(client, TaskState.SUBMITTED, source=source, confirm_settled=False)
            seen = [(await updates.next(5, on_idle=idle)).status.state]
            calls_after_first = len(idle_calls)
            seen.append((await updates.next(5, on_idle=idle)).status.state)
            await updates.aclose()
            return [calls_after_first, len(idle_calls)], seen

    calls, seen = asyncio.run(follow())
    assert seen == [TaskState.WORKING, TaskState.COMPLETED]
    assert calls == [0, 1]


def test_a_settled_task_from_our_own_stream_is_not_fetched_again() -> None:
    """With confirm_settled=False the settling event is the answer (no GetTask is tried:
    the endpoint here does not exist); with the default it is confirmed, and a failed
    confirmation is noted."""

    async def source() -> AsyncIterator[StreamResponse]:
        yield _status(TaskState.COMPLETED)

    async def follow(confirm: bool) -> tuple[TaskState, list[str]]:
        async with A2AClient() as client:
            updates = _updates(client, TaskState.WORKING, source=source, confirm_settled=confirm)
            task = await updates.next(5)
            await updates.aclose()
            return task.status.state, updates.notes

    assert asyncio.run(follow(False)) == (TaskState.COMPLETED, [])
    state, notes = asyncio.run(follow(True))
    assert state is TaskState.COMPLETED and notes and notes[0].startswith("poll failed")


def test_closing_while_a_read_is_pending_releases_the_stream_once() -> None:
    """aclose during a wait cancels the pending read, closes the source and releases its
    slot exactly once."""
    released: list[int] = []
    closed: list[int] = []

    async def source() -> AsyncIterator[StreamResponse]:
        try:
            await asyncio.sleep(30)
            yield _status(TaskState.WORKING)
        finally:
            closed.append(1)

    async def follow() -> None:
        async with A2AClient() as client:
            updates = _updates(
                client, TaskState.WORKING, source=source, on_release=lambda: released.append(1)
            )
            waiting = asyncio.ensure_future(updates.next(30, on_idle=_nothing))
            await asyncio.sleep(0.1)
            waiting.cancel()
            await asyncio.wait({waiting})
            await updates.aclose()
            await updates.aclose()

    asyncio.run(follow())
    assert released == [1] and closed == [1]
