"""Ctrl-C stops ``dafka pipeline`` at once while Spark starts (a real process, a real SIGINT):
the job, its JVM and the local cluster are stopped, and the command says so and exits 130.
Before, the first Ctrl-C was only noted and did nothing until the feed began."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, session id, command line) of every live process."""
    out: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, UnicodeDecodeError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":  # a zombie has exited already
            out[int(entry)] = (int(fields[1]), int(fields[3]), cmd)
    return out


def _wait_for(check: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def test_ctrl_c_while_spark_starts_stops_everything(tmp_path: Path) -> None:
    data = tmp_path / "data"
    command = [
        sys.executable,
        "-m",
        "dafka.pipeline",
        "--data",
        str(data),
        "--readings",
        "3000",
        "--rate",
        "50",
    ]
    cli = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(cli.stdout or ()), daemon=True)
    reader.start()
    try:

        def job() -> int | None:
            for pid, (_, _, cmd) in _processes().items():
                if "dafka.pipeline._child job" in cmd and str(data) in cmd:
                    return pid
            return None

        job_pid = _wait_for(job, 120, "the Spark job's process")
        assert isinstance(job_pid, int)
        _wait_for(lambda: any("starting Spark" in line for line in lines), 60, "'starting Spark'")
        assert not any("producing" in line for line in lines)  # still starting
        started = {pid for pid, (parent, _, _) in _processes().items() if parent == cli.pid}
        assert job_pid in started  # and the tower and stores of its local cluster
        cli.send_signal(signal.SIGINT)
        try:
            code = cli.wait(120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 120 s after Ctrl-C; its output: {''.join(lines)[-2000:]}")
        reader.join(10)
        output = "".join(lines)
        assert code == 130, output[-2000:]
        assert "interrupted while starting Spark: stopped without checks" in output
        assert "producing" not in output  # the feed never started

        def left() -> dict[int, str]:
            """What the run started that still runs: its children (the job, the tower and
            stores), and what the job started (its JVM, Spark's Python workers)."""
            return {
                pid: cmd
                for pid, (_, session, cmd) in _processes().items()
                if pid in started or session == job_pid
            }

        try:
            _wait_for(lambda: not left(), 10, "the processes to be gone")
        except AssertionError:
            pytest.fail(f"still running after the command exited: {left()}")
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        reader.join(10)
        if cli.stdout is not None:
            cli.stdout.close()


def test_ctrl_c_as_the_feed_begins_drains_and_checks_what_was_sent(tmp_path: Path) -> None:
    """The first Ctrl-C while producing stops the feed, and the run drains and checks what
    was sent - here at the very start of producing (the runner's own SIGINT handler, the
    signal sent when the runner first shows the phase): a producer signalled before it
    installed its handler died of it (exit -15: 'pipeline failed'), one done before the
    other had reported let the run go on without it, and no lag sample made the summary
    an IndexError."""
    from dafka.pipeline import WorkloadSpec
    from dafka.pipeline._run import Runner, RunOptions, Timings
    from dafka.pipeline._state import State

    interrupted: list[str] = []

    def display(_state: State, phase: str, _timings: Timings) -> None:
        if phase == "producing" and not interrupted:
            interrupted.append(phase)
            os.kill(os.getpid(), signal.SIGINT)

    spec = WorkloadSpec(seed=3, readings=3_000, devices=8, step_ms=10, max_lateness_ms=2_000)
    options = RunOptions(data_dir=tmp_path, spec=spec, rate=100.0, window_ms=2_000)
    runner = Runner(options, display)
    summary = runner.run()
    assert interrupted
    failed = [c for c in summary.checks if not c.ok]
    assert not failed, failed
    assert runner.state.sent < 3_000  # the feed was stopped
    assert runner.state.producers_done
    assert set(runner.state.producers) == {"producer-0", "producer-1"}
