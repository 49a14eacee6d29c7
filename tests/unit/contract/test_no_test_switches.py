"""Production code has no test branches (issue 22): it reads the environment only where the
environment is configuration (the DAFKA_* settings layers, the CLI's entry point) or where it
launches processes; faults are injected by tests through typed seams (``drop_inbound=``,
``commit_fault=``, the Spark writers' ``fault``) with the injectors in ``dafka.testing``.

Checked on the source (parsed, not imported): every ``os.environ`` / ``os.getenv`` /
``os.putenv`` use, and every string that names a test switch (``DAFKA_TEST...``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.unit.contract.test_import_contract import MODULES

READS_ENVIRONMENT: dict[str, str] = {
    "dafka.client._settings": "the clients' settings layers: DAFKA_* variables",
    "dafka.cli.main": "the CLI's settings layers: DAFKA_* variables",
    "dafka.pipeline._job": "the Spark job sets Spark's own variables for its workers",
    "dafka.pipeline._children": "the pipeline's children inherit the environment",
    "dafka.transport.memory": "a daemon re-executes itself with the allocator's variables "
    "(PYTHONMALLOC, MALLOC_ARENA_MAX) unless they are set",
}
"""The modules that may touch ``os.environ``, and why."""

_ENV_CALLS = frozenset({"environ", "getenv", "putenv", "unsetenv", "environb"})


def environment_uses(path: Path) -> list[tuple[int, str]]:
    """``(line, what)`` of every environment access and test-switch name in the file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in _ENV_CALLS
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append((node.lineno, f"os.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [
                (node.lineno, f"from os import {a.name}")
                for a in node.names
                if a.name in _ENV_CALLS
            ]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and ("DAFKA_TEST" in node.value or "_SINK_FAIL" in node.value)
        ):
            found.append((node.lineno, f"names a test switch: {node.value[:40]!r}"))
    return found


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_production_code_reads_no_test_switch(module: str, path: Path) -> None:
    uses = environment_uses(path)
    if module in READS_ENVIRONMENT:
        uses = [(line, what) for line, what in uses if "test switch" in what]
    assert not uses, f"{module}:\n" + "\n".join(f"line {n}: {w}" for n, w in uses)


def test_the_checker_sees_a_test_switch(tmp_path: Path) -> None:
    """Not vacuous: the old spellings of the two switches are caught."""
    bad = tmp_path / "dafka" / "client" / "_bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "import os\n"
        "from os import getenv\n"
        'KILL = "DAFKA_TEST_KILL_AFTER_ACKS"\n'
        "kill_after = int(os.environ.get(KILL, '-1'))\n"
        "fail = getenv('DAFKA_SPARK_SINK_FAIL')\n"
    )
    found = environment_uses(bad)
    assert sorted(line for line, _ in found) == [2, 3, 4, 5]
    with pytest.raises(AssertionError, match=r"line 4: os\.environ"):
        test_production_code_reads_no_test_switch("dafka.client._bad", bad)
