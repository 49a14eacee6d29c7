"""A small real filesystem that can be filled: a tmpfs mount (root only), and a filler.

Disk-full tests need a filesystem whose free space they control: a tmpfs of a few MB is
that, and mounting one needs root (``mount -t tmpfs``). :func:`small_tmpfs` raises
:class:`TmpfsUnavailableError` with the reason when it cannot mount, so a test can skip saying
why (and ``scripts/chaos.py`` can leave the disk fault out).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path


class TmpfsUnavailableError(Exception):
    """This process cannot mount a tmpfs (not root, no mount(8), or mount refused)."""


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``path`` (created) for the ``with`` block; unmount after."""
    if os.geteuid() != 0:
        raise TmpfsUnavailableError("mounting a tmpfs needs root (this test runs as a normal user)")
    mount = shutil.which("mount")
    if mount is None:
        raise TmpfsUnavailableError("mount(8) is not installed")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise TmpfsUnavailableError(f"mount -t tmpfs refused: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(directory: Path, name: str = "filler", leave: int = 0) -> Path:
    """Write a file in ``directory`` until the filesystem is full (``leave`` bytes spared)."""
    path = directory / name
    block = b"\xa5" * 65536
    with path.open("ab", buffering=0) as f:
        while True:
            free = shutil.disk_usage(directory).free - leave
            if free <= 0:
                break
            try:
                f.write(block[: min(len(block), free)])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    return path


def free_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free


__all__ = ["TmpfsUnavailableError", "fill", "free_bytes", "small_tmpfs"]
