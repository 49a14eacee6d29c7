"""Running ``dafka`` as a real process for the CLI tests."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from tests.integration.cluster.cluster_procs import DAFKA


@dataclass(frozen=True)
class Result:
    code: int
    out: bytes
    err: str


def dafka(
    *args: str, stdin: bytes = b"", env: dict[str, str] | None = None, timeout: float = 60.0
) -> Result:
    """Run ``dafka ARGS`` with ``stdin``; environment = ours without DAFKA_* plus ``env``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DAFKA_")}
    environ.update(env or {})
    done = subprocess.run(
        [*DAFKA, *args], input=stdin, capture_output=True, timeout=timeout, env=environ, check=False
    )
    return Result(done.returncode, done.stdout, done.stderr.decode(errors="replace"))
