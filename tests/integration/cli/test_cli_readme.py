"""The README's shell examples as a new user types them after the two commands.

``make run`` / ``make test`` install ``dafka`` into ``.venv``, which is not on the PATH of a
new terminal: the README says how to put it there before its first ``dafka`` example, and
every example (README and docs) calls ``dafka`` the same way. What the examples and
``dafka up`` write into the checkout is ignored by git.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from dafka.config import SETTINGS

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
_CALLS_DAFKA = re.compile(r"(^|\|\s*)dafka\s")


def _blocks(page: Path = README) -> list[tuple[int, str]]:
    """(offset in the page, code) of every ``sh`` block."""
    return [(m.start(), m.group(1)) for m in _BLOCK.finditer(page.read_text())]


def _new_terminal_env() -> dict[str, str]:
    """The environment of a new terminal: no virtual environment on the PATH."""
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(path)
    return env


def test_the_readme_puts_dafka_on_the_path_before_its_first_dafka_example(
    tmp_path: Path,
) -> None:
    blocks = _blocks()
    first = next(
        at for at, code in blocks if any(_CALLS_DAFKA.search(x) for x in code.splitlines())
    )
    setup = [
        line.split("#", 1)[0].strip()
        for at, code in blocks
        if at < first
        for line in code.splitlines()
        if line.startswith("source ")
    ]
    assert setup, "no `source ...` line before the README's first `dafka` example"
    env = _new_terminal_env()
    assert shutil.which("dafka", path=env["PATH"]) is None, "dafka is on a new terminal's PATH"
    # what the README says, typed in a new terminal at the checkout, then dafka elsewhere
    done = subprocess.run(
        ["bash", "-c", f"{' && '.join(setup)} && cd {tmp_path} && dafka --version"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("dafka, version"), done.stdout


def test_every_example_calls_dafka_the_same_way() -> None:
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    calls = 0
    for page in pages:
        for _, code in _blocks(page):
            assert ".venv/bin/dafka" not in code, f"{page.name}: call it `dafka`\n{code}"
            calls += sum(1 for line in code.splitlines() if _CALLS_DAFKA.search(line))
    assert calls > 10


def test_what_the_examples_and_dafka_up_write_into_the_checkout_is_ignored_by_git() -> None:
    dirs = {str(SETTINGS["up/db"].default)}
    for _, code in _blocks():
        dirs.update(re.findall(r"--data\s+(\S+)", code))
    assert len(dirs) > 1
    for d in sorted(dirs):
        probe = str(Path(d) / "store-0" / "segment.log")
        done = subprocess.run(
            ["git", "check-ignore", "-q", probe], cwd=ROOT, timeout=30, check=False
        )
        assert done.returncode == 0, f"{probe} is not ignored by git (.gitignore)"
