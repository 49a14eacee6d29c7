"""A secured cluster of real processes for the security tests: ``dafka keygen`` keys, a tower
and 2 stores (``dafka up``'s LocalCluster with ``--key``/``--authorized-keys``), and the
options that make a ``dafka`` command join it with a given key.

One place for what test_curve_cluster.py and test_acl_cluster.py both set up (each had its
own copy)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dafka.server import LocalCluster
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL


class Log:
    """Every line the cluster's members write, kept whole (their own tails keep 50)."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)

    def count(self, member: str, text: str) -> int:
        with self._lock:
            return sum(1 for line in self._lines if line.startswith(member) and text in line)


def keygen(tmp_path: Path, names: tuple[str, ...]) -> tuple[Path, Path]:
    """``dafka keygen`` for each of ``names`` in ``tmp_path/keys``; the authorized directory
    (``tmp_path/authorized``) holds every public key but the ``stranger``'s."""
    keys, auth = tmp_path / "keys", tmp_path / "authorized"
    keys.mkdir()
    auth.mkdir()
    for name in names:
        made = dafka("keygen", str(keys / name))
        assert made.code == 0, made.err
        if name != "stranger":
            shutil.copy(keys / f"{name}.key", auth)
    return keys, auth


@dataclass(frozen=True)
class Secured:
    """The running cluster, every line its members wrote, and the keys."""

    cluster: LocalCluster
    log: Log
    keys: Path
    auth: Path

    @property
    def join(self) -> list[str]:
        """A command's options that find the cluster."""
        return ["--tower", self.cluster.towers, "--beacon-interval", BEACON_INTERVAL]

    def as_(self, name: str) -> list[str]:
        """A command's options that make it ``name`` (its secret key)."""
        return ["--key", str(self.keys / f"{name}.key_secret"), "--authorized-keys", str(self.auth)]


@contextmanager
def secured_cluster(tmp_path: Path, keys: Path, auth: Path, **options: Any) -> Iterator[Secured]:
    """A tower and 2 stores with the tower's key (``options``: more of LocalCluster's)."""
    log = Log()
    with LocalCluster(
        tmp_path / "d",
        stores=2,
        beacon_interval=float(BEACON_INTERVAL),
        key=keys / "tower.key_secret",
        authorized_keys=auth,
        echo=log,
        **options,
    ) as c:
        yield Secured(c, log, keys, auth)
