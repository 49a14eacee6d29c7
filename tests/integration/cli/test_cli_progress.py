"""``dafka produce`` shows rich progress on a terminal (a real pty) and is quiet in a pipe."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

from dafka.server import LocalCluster
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import DAFKA, wait_until


def _plain(shown: bytearray) -> str:
    """What the terminal shows, without its control sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", bytes(shown).decode(errors="replace"))


def test_produce_progress_on_a_terminal_and_silence_in_a_pipe(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "data", stores=1, beacon_interval=0.2) as cluster:
        node = ["--tower", cluster.towers, "--beacon-interval", "0.2"]
        master, slave = os.openpty()
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAFKA_")}
        env.update(TERM="xterm", COLUMNS="120")
        proc = subprocess.Popen(
            [*DAFKA, "produce", "progress", *node],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=slave,
            env=env,
        )
        os.close(slave)
        shown = bytearray()

        def read() -> None:
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    return
                if not data:
                    return
                shown.extend(data)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert proc.stdin is not None
            proc.stdin.write(b"".join(b"m%d\n" % i for i in range(2000)))
            proc.stdin.flush()
            wait_until(
                lambda: "2,000 sent  2,000 stored  0 unACKed" in _plain(shown),
                "a progress line with all 2,000 stored",
            )
            proc.stdin.write(b"last\n")
            proc.stdin.close()
            assert proc.wait(60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            reader.join(10)
            os.close(master)
        raw = shown.decode(errors="replace")
        assert "\x1b[" in raw  # drawn with terminal control sequences (rich)
        text = _plain(shown)
        assert "msg/s" in text
        assert "2001 messages stored in 'progress'" in text
        assert "Traceback" not in text

        piped = dafka("produce", "progress", *node, stdin=b"a\nb\n")
        assert piped.code == 0
        assert piped.err == ""  # quiet in a pipe
