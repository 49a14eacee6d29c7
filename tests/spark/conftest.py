"""Spark tests: a real local Spark (JVM + Python workers) against a real dafka cluster.

One SparkSession per module (``spark`` fixture, module scope): a session costs ~5-10 s to
start on this machine. Workers run this interpreter (``PYSPARK_PYTHON``), which has dafka
installed, so ``format("dafka")`` resolves through ``pyspark_dafka`` without registration.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from pyspark.sql import SparkSession

from dafka.server import InProcessCluster, free_port_pair
from dafka.transport.config import TransportConfig


def make_session(master: str = "local[2]", **conf: str) -> SparkSession:
    builder = (
        SparkSession.builder.master(master)
        .appName("dafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.streaming.pollingDelay", "10ms")
        # a loaded machine: Python workers authenticate and answer slowly (the 10 s
        # connect-back of a streaming source's process is fixed: see eos_driver.py)
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.network.timeout", "300s")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = make_session()
    yield session
    session.stop()


class Cluster:
    """An in-process tower + store on a free port, and the ``towers`` option to reach it."""

    def __init__(self, data_dir: Path, stores: int = 1, port: int | None = None) -> None:
        self.port = free_port_pair() if port is None else port
        self.towers = f"127.0.0.1:{self.port}"
        self.inner = InProcessCluster(data_dir, stores=stores, tower_port=self.port)

    @property
    def transport(self) -> TransportConfig:
        return self.inner.client_transport()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("dafka"))
    c.inner.start()
    yield c
    c.inner.stop()


def wait_until(check: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
