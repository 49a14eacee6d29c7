"""The whole pipeline on a small feed: a real cluster (processes), real Spark, exact output,
while the Spark job is SIGKILLed (and restarted from its checkpoints) and a store is
SIGKILLed (and restarted by the cluster's supervisor)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dafka.pipeline import WorkloadSpec
from dafka.pipeline._run import Chaos, Runner, RunOptions, Timings
from dafka.pipeline._state import State

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

SPEC = WorkloadSpec(
    seed=13, readings=3_000, devices=8, step_ms=10, max_lateness_ms=2_000, max_duplicate_delay=50
)


def quiet(_state: State, _phase: str, _timings: Timings) -> None:
    pass


def test_exact_output_through_a_job_kill_and_a_store_kill(tmp_path: Path) -> None:
    options = RunOptions(
        data_dir=tmp_path,
        spec=SPEC,
        producers=2,
        rate=100.0,  # 30 s of feed: the kills happen while it is produced
        window_ms=2_000,
        watermark_ms=5_000,
        chaos=Chaos(kill_job_after_batches=2, kill_store_at=0.3),
        timeout=600,
    )
    runner = Runner(options, quiet)
    summary = runner.run()
    failed = [c for c in summary.checks if not c.ok]
    assert not failed, failed
    assert runner.job_killed, "the job was not killed: the test proved less than it says"
    assert runner.store_killed
    assert runner.state.job.runs >= 2  # the kill; a failed start is restarted too
    names = {c.name for c in summary.checks}
    assert {"output topic = expected", "Parquet = expected", "dead letters accounted for"} <= names
