"""The pipeline secured (issue 19): ``RunOptions(security=...)`` on a small feed runs its
local cluster with CURVE; its producers, the Spark job's source and sink (the connector's
``key`` options) and its checks all hold the key, and the output is exact; a plaintext
reader of the same cluster is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dafka.client import Consumer
from dafka.config import KeyFiles
from dafka.pipeline import WorkloadSpec
from dafka.pipeline._run import Runner, RunOptions, Timings
from dafka.pipeline._state import State
from dafka.transport.runner import NodeNotReadyError
from dafka.transport.security import keygen

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

SPEC = WorkloadSpec(
    seed=5, readings=600, devices=4, step_ms=10, max_lateness_ms=1_000, max_duplicate_delay=20
)


def quiet(_state: State, _phase: str, _timings: Timings) -> None:
    pass


def test_a_secured_pipeline_run_is_exact(tmp_path: Path) -> None:
    auth = tmp_path / "authorized"
    auth.mkdir()
    public, secret = keygen(tmp_path / "pipeline")
    shutil.copy(public, auth)
    security = KeyFiles(str(secret), str(auth))
    options = RunOptions(
        data_dir=tmp_path / "run",
        spec=SPEC,
        producers=1,
        rate=0.0,
        window_ms=1_000,
        watermark_ms=3_000,
        timeout=600,
        security=security,
    )
    runner = Runner(options, quiet)
    start_cluster = runner._start_cluster
    refused: list[str] = []

    def started() -> str:
        """The run's local cluster, tried once without the key: it must refuse plaintext."""
        towers = start_cluster()
        with pytest.raises(NodeNotReadyError, match="no welcome from any tower") as caught:
            Consumer(["sensors"], towers=towers).close()
        refused.append(str(caught.value))
        return towers

    runner._start_cluster = started  # type: ignore[method-assign]
    summary = runner.run()
    failed = [c for c in summary.checks if not c.ok]
    assert not failed, failed
    assert {"output topic = expected", "Parquet = expected"} <= {c.name for c in summary.checks}
    assert refused  # the cluster was secured
