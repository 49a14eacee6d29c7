"""The pipeline's child processes (producers, the Spark job) and how the runner talks to them.

Each child runs ``python -m dafka.pipeline._child KIND CONFIG_JSON`` in its own session (a
terminal's Ctrl-C reaches only the runner, which then stops the children in order), dies with
the runner (Linux ``PR_SET_PDEATHSIG``), writes its log to a file, and reports on stdout one
JSON object per line, which a reader thread puts on the runner's event queue.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

Event = tuple[str, dict[str, Any]]
"""(child name, the JSON object it reported); ``{"type": "exit", "code": n}`` at its end."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)


class Child:
    """One child process and the thread that reads its reports."""

    def __init__(
        self,
        name: str,
        kind: str,
        config_json: str,
        log_path: Path,
        events: queue.Queue[Event],
        python: str = sys.executable,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = log_path.open("ab")
        self.popen = subprocess.Popen(
            [python, "-m", "dafka.pipeline._child", kind, config_json],
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            env={**os.environ, **(env or {})},
        )
        self._events = events
        self._reader = threading.Thread(target=self._read, name=f"pipeline-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            line = raw.decode("utf-8", "replace").strip()
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                self._events.put((self.name, obj))
            elif line:
                self._log.write(raw)
                self._log.flush()
        self._events.put((self.name, {"type": "exit", "code": self.popen.wait()}))

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the child's whole process group (the JVM and workers too)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signum)

    def stop(self, timeout: float) -> int:
        """SIGTERM to the child alone (it stops what it started: Spark's JVM, workers), wait
        up to ``timeout``, then SIGKILL to its group; returns the exit code."""
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            code = self.popen.wait()
        self.signal(signal.SIGKILL)  # what it started and left behind (a JVM, workers)
        self._reader.join(5)
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        self._log.close()
        return code

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


__all__ = ["Child", "Event"]
