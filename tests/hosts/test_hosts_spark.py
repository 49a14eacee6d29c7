"""A Spark query across hosts: read from the remote stores, write to them exactly once.

Host b produces, host c runs a local Spark (``tests/hosts/hosts_spark.py``: a batch read of
the topic and a write of every value with the exactly-once sink), host a reads the output
read-committed. The Spark tasks, like every client, name only the towers and listen where
their host reaches the tower (issue 24: the connector's default was to listen on every
interface and to let the tower say where).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.hosts.conftest import Cluster, done_event

SPARK_JOB = Path(__file__).with_name("hosts_spark.py")
COUNT = 2000


def test_a_spark_query_reads_and_writes_across_hosts(cluster: Cluster) -> None:
    writer = cluster.client("b", "spark-in", "produce", "spark-in", "--count", str(COUNT))
    assert done_event(writer)["acked"] == COUNT
    argv = [sys.executable, str(SPARK_JOB), "--towers", cluster.towers]
    job = cluster.procs.spawn(
        "spark",
        cluster.host("c").command([*argv, "--topic", "spark-in", "--out", "spark-out"]),
    )
    read = job.wait_event("done", timeout=280)
    assert job.wait_exit() == 0, job.tail()
    assert (read["read"], read["unique"]) == (COUNT, COUNT), read
    reader = cluster.client(
        "a", "spark-out", "consume", "spark-out", "--expect", str(COUNT), "--committed"
    )
    got = done_event(reader)
    assert (got["unique"], got["duplicates"], got["missing"]) == (COUNT, 0, 0), got
