"""Fixtures of the CLI tests: real ``dafka`` processes, logs in files, all killed at teardown
(the cluster tests' process registry, ``procs``)."""

from __future__ import annotations

from tests.integration.cluster.conftest import procs

__all__ = ["procs"]
