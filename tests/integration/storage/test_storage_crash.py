"""SIGKILL a real writer process at random moments; every record it reported durable stays.

Each round starts the writer on the same data directory, lets it append for a random time
while reading the durable offsets it reports through a pipe, kills it with SIGKILL, then
reopens the storage here and checks: every partition holds offsets 0..head with the exact
payloads, head >= every offset reported durable, and recovery never found corruption.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dafka.storage import Storage
from tests.integration.storage.storage_crash_writer import KEYS, config, payload

WRITER = Path(__file__).with_name("storage_crash_writer.py")


def run_round(
    root: Path, policy: str, seed: int, rng: random.Random, durable: dict[tuple[str, str], int]
) -> int:
    """One writer life; returns how many durable reports it made."""
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(root), policy, str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    buffer = b""
    reports = 0
    ready_deadline = time.monotonic() + 60
    kill_at: float | None = None

    def consume(data: bytes) -> None:
        nonlocal buffer, reports, kill_at
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            if raw == b"ready":
                kill_at = time.monotonic() + rng.uniform(0.005, 0.25)
                continue
            t, p, off = raw.split(b" ")
            key = (
                bytes.fromhex(t.decode()).decode("utf-8", "surrogateescape"),
                bytes.fromhex(p.decode()).decode("utf-8", "surrogateescape"),
            )
            assert int(off) >= durable.get(key, -1), "durable offsets never go back"
            durable[key] = int(off)
            reports += 1

    try:
        while True:
            now = time.monotonic()
            deadline = kill_at if kill_at is not None else ready_deadline
            if now >= deadline:
                assert kill_at is not None, "writer never became ready: " + repr(proc.stderr)
                break
            for _key, _ in selector.select(timeout=deadline - now):
                data = os.read(proc.stdout.fileno(), 1 << 16)
                if not data:  # the writer died on its own: show why
                    proc.wait(timeout=10)
                    pytest.fail(proc.stderr.read().decode() if proc.stderr else "writer exited")
                consume(data)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        selector.close()
    # lines written before the kill were reported durable too
    while data := os.read(proc.stdout.fileno(), 1 << 16):
        consume(data)
    proc.stdout.close()
    if proc.stderr is not None:
        proc.stderr.close()
    return reports


def check(root: Path, policy: str, durable: dict[tuple[str, str], int]) -> None:
    with Storage.open(root, config(policy)) as storage:
        for cut in storage.recovery_report.truncations:
            assert cut.reason == "torn", cut
        for key in KEYS:
            head = storage.head(*key)
            reported = durable.get(key)
            if reported is not None:
                assert head is not None
                assert head >= reported, (key, head, reported)
            if head is None:
                continue
            records = storage.read(*key, 0, head + 1)
            assert [o for o, _ in records] == list(range(head + 1))
            for offset, data in records:
                assert data == payload(key[1], offset)
            assert storage.read(*key, head + 1, 10) == []


@pytest.mark.parametrize("policy", ["batch", "records:64", "ms:2", "os"])
def test_sigkill_never_loses_what_was_reported_durable(tmp_path: Path, policy: str) -> None:
    rng = random.Random(f"crash-{policy}")
    durable: dict[tuple[str, str], int] = {}
    reports = 0
    for _ in range(5):
        reports += run_round(tmp_path, policy, rng.randrange(1 << 30), rng, durable)
        check(tmp_path, policy, durable)
    assert reports > 0, "the writer never reported anything durable"
    assert durable, "no partition was ever durable"
