"""The README's Python examples use only the front door (``from dafka import ...``) and parse.

Issue 9 asks that no user code import ``dafka.node``, ``dafka.transport`` or zmq; the README
is what users copy. (That the examples run against a real cluster is shown by
``tests/integration/examples``, whose programs the README's quick start mirrors.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dafka

README = Path(__file__).resolve().parents[3] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_readme_python_examples_import_only_the_front_door() -> None:
    blocks = _blocks()
    assert blocks, "the README has Python examples"
    names: set[str] = set()
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] in ("dafka", "zmq") for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                top = node.module.split(".")[0]
                assert top != "zmq", f"the README imports zmq: {ast.unparse(node)}"
                if top == "dafka":
                    assert node.module == "dafka", f"not the front door: {ast.unparse(node)}"
                    names.update(a.name for a in node.names)
    assert names, "the README imports from dafka"
    assert names <= set(dafka.__all__), f"not exported by dafka: {names - set(dafka.__all__)}"
