"""Issue 19: a beacon flood of made-up node ids (15,000 a second, here for 5 s; the 30 s
version is ``scripts/beacon_flood.py``) crashes nothing, stops neither live delivery nor a
producer that starts mid-flood, and the tower's memory comes back once it ends.

Before discovery's bounds every node tracked and connected to every made-up id (15,000
connections and 60,000 tracked peers in 5 s, ``test_node_discovery_limits.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cluster.cluster_procs import Processes
from tests.integration.hardening.beacon_flood import run_flood


@pytest.mark.timeout(240)
def test_a_beacon_flood_crashes_nothing_and_stops_nothing(procs: Processes, tmp_path: Path) -> None:
    result = run_flood(procs, tmp_path, seconds=5.0, rate=15_000.0, settle=20.0)
    print(result.describe())
    assert not result.down, result.describe()
    assert result.sent > 50_000, result.describe()
    assert result.delivered_during > 0, result.describe()  # live delivery goes on
    assert result.late_producer_acked == 100, result.describe()  # a newcomer gets in
    tower = ("tower", result.rss_before["tower"], result.rss_after["tower"])
    assert tower[2] <= tower[1] * 1.2, (tower, result.describe())
