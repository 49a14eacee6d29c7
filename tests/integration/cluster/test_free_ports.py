"""free_port_pair: tower ports below the kernel's ephemeral range, in turn across processes."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from dafka.server import free_port_pair
from dafka.server._ports import _ephemeral_low


def test_ports_go_round_the_window_below_the_ephemeral_range_across_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster stopped a moment ago may leave a node reconnecting to its tower's port:
    the next cluster must not get that port (a kernel pick could be it), nor any node's
    own port (the kernel picks those from the ephemeral range)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR, here and in children
    other = [sys.executable, "-c", "from dafka.server import free_port_pair as f; print(f())"]
    got: list[int] = []
    for _ in range(3):
        got.append(free_port_pair())
        got.append(int(subprocess.run(other, capture_output=True, check=True).stdout))
    assert len(set(got)) == len(got), got
    assert all(p + 1 < _ephemeral_low() for p in got), got
    assert got == sorted(got)  # in turn: one cursor shared by both processes


def test_a_taken_port_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    port = free_port_pair()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 3))  # the next pair's second port
        after = free_port_pair()
    assert after == port + 4
