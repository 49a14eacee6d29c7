"""Whether Spark's Python workers can import dafka, said before Spark says it worse.

Every Python process Spark starts - the streaming planner, the executors' workers - must
import the connector, and they run the interpreter ``PYSPARK_PYTHON`` (or the conf
``spark.pyspark.python``) names, not necessarily the driver's. When that interpreter lacks
dafka, Spark's lookup of ``format("dafka")`` finds no ``pyspark_dafka`` module and fails
with ``DATA_SOURCE_NOT_FOUND``, which does not say why. :func:`check_workers` starts that
interpreter once and says what is wrong and how to fix it. It can only try the interpreter
on this machine (executors elsewhere must have it at the same path).
"""

from __future__ import annotations

import subprocess
import sys

from pyspark.sql import SparkSession

from dafka.errors import ConfigError

_TIMEOUT = 120.0


def workers_python(spark: SparkSession) -> str:
    """The interpreter Spark's Python workers run (as PySpark picks it)."""
    conf = spark.sparkContext.getConf()
    chosen: str = conf.get("spark.pyspark.python", None) or spark.sparkContext.pythonExec
    return chosen


def check_python(python: str) -> None:
    """Raise :class:`ConfigError` unless ``python`` imports the connector."""
    fix = (
        f"install it there ({python} -m pip install 'dafka[spark]') or give the workers the "
        f"interpreter that has it: PYSPARK_PYTHON={sys.executable}"
    )
    try:
        done = subprocess.run(
            [python, "-c", "import pyspark_dafka"],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(
            f"Spark's Python workers run {python!r} (PYSPARK_PYTHON or spark.pyspark.python), "
            f"which could not be started ({exc}): {fix}"
        ) from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise ConfigError(
            f"Spark's Python workers run {python} (PYSPARK_PYTHON or spark.pyspark.python), "
            f"which cannot import dafka ({lines[-1] if lines else 'exit ' + str(done.returncode)})"
            f": format('dafka') fails there with DATA_SOURCE_NOT_FOUND; {fix}"
        )


def check_workers(spark: SparkSession) -> None:
    """Raise :class:`ConfigError`, saying how to fix it, when ``spark``'s Python workers
    cannot import dafka (``register`` does it; call it first in any driver)."""
    check_python(workers_python(spark))


__all__ = ["check_python", "check_workers", "workers_python"]
