"""Issue 22: a node's transport is built in one place from one tower grammar.

Five places used to build a ``TransportConfig`` from two tower grammars (the commands'
``host:port`` / ``host:subport:pubport`` and the clients' ``host:port`` only), so that
``dafka produce --tower H:S:P`` failed where ``dafka consume`` took it. Now the towers are
parsed by ``dafka.config.tower_endpoints`` and a transport naming towers is built by
``TransportConfig.for_towers`` only: the source is parsed here to keep it so (the grammar
itself is tested in tests/unit/config and tests/unit/client, each command's use of it in
tests/integration/cli/test_cli_towers.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "dafka"
BUILDER = SRC / "transport" / "config.py"


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_only_the_builder_names_tower_addresses() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == BUILDER:
            continue
        for call in _calls(ast.parse(path.read_text(), str(path))):
            named = {k.arg for k in call.keywords}
            if named & {"tower_sub_addresses", "tower_pub_addresses"}:
                offenders.append(f"{path.relative_to(SRC)}:{call.lineno}")
    assert offenders == [], "build transports with TransportConfig.for_towers"
