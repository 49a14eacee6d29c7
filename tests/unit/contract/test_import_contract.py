"""Issue 8 item 7: the import contract of docs/architecture.md, checked on the source.

Every module under ``src/dafka`` is parsed (not imported: imports inside functions and
under ``TYPE_CHECKING`` count too) and its imports are held to three rules:

* only ``dafka.transport`` imports ZeroMQ: users never depend on a zmq type, and the one
  thread that owns the sockets is the only code that touches them;
* only the Spark connector (``dafka.spark``) and the Spark job built on it
  (``dafka.pipeline``) import pyspark, so that the core installs and imports without it;
* packages are layered: a package imports only packages of lower layers (``server`` does
  not import ``client``, the pure layers nothing that does I/O);
* a package uses another only through its public face: no module imports another package's
  private (``_``-prefixed) module or name (``dafka.client._heads``), so a package's inside
  can change without reaching into its users. What another package needs is exported by the
  owner's ``__init__`` (or a public module such as ``dafka.records.arrow``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[3] / "src"

LAYERS: dict[str, int] = {
    "errors": 0,
    "lifecycle": 0,
    "protocol": 1,
    "message": 1,
    "storage": 1,
    "node": 2,
    "config": 2,
    "records": 2,
    "transport": 3,
    "testing": 3,
    "client": 4,
    "server": 4,
    "spark": 5,
    "metrics": 5,
    "pipeline": 6,
    "cli": 7,
}
"""A package may import packages of lower layers only (the root ``dafka`` facade any)."""

ONLY: dict[str, frozenset[str]] = {
    "zmq": frozenset({"transport"}),
    "pyspark": frozenset({"spark", "pipeline"}),
}
"""Third-party packages only some of ours may import."""


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted((SRC / "dafka").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((".".join(parts), path))
    return found


def imported(module: str, path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import statement in the file."""
    out: list[tuple[int, str]] = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return out


def private_part(name: str) -> str | None:
    """The first ``_``-prefixed part of ``name`` below its package (``dafka.client._heads.X``
    -> ``_heads``), None if every part is public (dunders such as ``__version__`` are)."""
    for part in name.split(".")[2:]:
        if part.startswith("_") and not part.startswith("__"):
            return part
    return None


def package_of(module: str) -> str | None:
    """``dafka.client._ids`` -> ``client``; None for the root modules (``dafka.errors`` is
    the package ``errors``)."""
    parts = module.split(".")
    if parts[0] != "dafka" or len(parts) < 2:
        return None
    return parts[1]


MODULES = modules()


def test_every_package_has_a_layer() -> None:
    assert len(MODULES) > 100, f"found only {len(MODULES)} modules under {SRC}"
    packages = {package_of(m) for m, p in MODULES if p.name != "__main__.py"} - {None}
    packages -= {"__init__", "__main__"}
    assert packages <= set(LAYERS), f"give these packages a layer: {packages - set(LAYERS)}"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_imports_follow_the_contract(module: str, path: Path) -> None:
    own = package_of(module)
    problems = []
    for line, name in imported(module, path):
        top = name.split(".")[0]
        allowed = ONLY.get(top)
        if allowed is not None and own not in allowed:
            problems.append(f"line {line}: imports {name} (only {sorted(allowed)} may)")
        target = package_of(name)
        if top == "dafka" and target is not None and target != own and private_part(name):
            problems.append(
                f"line {line}: imports {name}, private to {target} "
                f"(use its public face: dafka.{target}.__all__)"
            )
        if top != "dafka" or target is None or own is None or own not in LAYERS:
            continue
        if target == own or target not in LAYERS:
            continue
        if LAYERS[target] >= LAYERS[own]:
            problems.append(
                f"line {line}: {own} (layer {LAYERS[own]}) imports {name} "
                f"({target}, layer {LAYERS[target]})"
            )
    assert not problems, f"{module}:\n" + "\n".join(problems)


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The rules are not vacuous: a server module importing zmq and the client is caught."""
    bad = tmp_path / "dafka" / "server" / "_bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("import zmq\nfrom ..client._ids import x\n\ndef f():\n    import pyspark.sql\n")
    names = [name for _, name in imported("dafka.server._bad", bad)]
    assert "zmq" in names
    assert "dafka.client._ids" in names
    assert "pyspark.sql" in names
    with pytest.raises(AssertionError, match="zmq"):
        test_imports_follow_the_contract("dafka.server._bad", bad)


def test_the_checker_sees_a_private_import(tmp_path: Path) -> None:
    """A layer-respecting import of another package's private module (or name) is caught,
    in every spelling; the same package's private modules and public faces are not."""
    bad = tmp_path / "dafka" / "spark" / "_bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "from dafka.client._heads import HeadWatcher\n"
        "import dafka.records._batch\n"
        "from dafka.protocol import _names\n"
    )
    with pytest.raises(AssertionError) as caught:
        test_imports_follow_the_contract("dafka.spark._bad", bad)
    message = str(caught.value)
    assert "line 1: imports dafka.client._heads, private to client" in message
    assert "line 2: imports dafka.records._batch, private to records" in message
    assert "line 3: imports dafka.protocol._names, private to protocol" in message
    good = tmp_path / "dafka" / "spark" / "_good.py"
    good.write_text(
        "from dafka.client import HeadWatcher\n"
        "from dafka.records.arrow import SCHEMA\n"
        "from dafka.spark._plan import plan\n"
        "from dafka import __version__\n"
    )
    test_imports_follow_the_contract("dafka.spark._good", good)
