"""dafka.lifecycle: the one ``with`` of everything closed, stopped or awaited-closed.

Each shape once, with a stand-in class; and a contract on the source: no other class
writes its own ``__enter__``/``__exit__`` (there were six copies of the close block).
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from dafka.lifecycle import AsyncClosing, Closing, Running

SRC = Path(__file__).resolve().parents[2] / "src" / "dafka"


class _QuietError(Exception):
    pass


class _Thing(Closing):
    quiet_errors = (_QuietError,)

    def __init__(self, fail_close: BaseException | None = None) -> None:
        self.calls: list[str] = []
        self.fail_close = fail_close

    def close(self) -> None:
        self.calls.append("close")
        if self.fail_close is not None:
            raise self.fail_close


def test_closing_closes_and_an_error_in_flight_wins_over_a_quiet_close_error() -> None:
    with _Thing() as thing:
        assert thing.calls == []
    assert thing.calls == ["close"]
    thing = _Thing(_QuietError("node died"))
    with pytest.raises(KeyError), thing:
        raise KeyError("the block's error")
    assert thing.calls == ["close"]
    thing = _Thing(_QuietError("node died"))
    with pytest.raises(_QuietError), thing:  # no error in flight: close's own error is seen
        pass
    thing = _Thing(OSError("disk"))  # not quiet: raised, chained to the block's error
    with pytest.raises(OSError, match="disk") as caught, thing:
        raise KeyError("the block's error")
    assert isinstance(caught.value.__context__, KeyError)


def test_running_starts_and_stops() -> None:
    calls: list[str] = []

    class Server(Running):
        def start(self) -> None:
            calls.append("start")

        def stop(self) -> None:
            calls.append("stop")

    with Server():
        assert calls == ["start"]
    assert calls == ["start", "stop"]
    with pytest.raises(KeyError), Server():
        raise KeyError("x")
    assert calls == ["start", "stop", "start", "stop"]


def test_async_closing_starts_closes_and_may_close_faster_after_an_error() -> None:
    calls: list[str] = []

    class Client(AsyncClosing):
        async def start(self) -> None:
            calls.append("start")

        async def close(self) -> None:
            calls.append("close")

        async def close_after_error(self) -> None:
            calls.append("close now")

    async def run() -> None:
        async with Client():
            assert calls == ["start"]
        with pytest.raises(KeyError):
            async with Client():
                raise KeyError("x")

    asyncio.run(run())
    assert calls == ["start", "close", "start", "close now"]


def test_no_other_class_writes_its_own_with_block() -> None:
    own = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "lifecycle.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in (
                "__enter__",
                "__exit__",
                "__aenter__",
                "__aexit__",
            ):
                own.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}")
    assert own == [], "use dafka.lifecycle (Closing, Running, AsyncClosing)"
