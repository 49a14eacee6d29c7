"""``dafka produce`` / ``consume`` given ``--acl`` say up front when the ACL grants their key
no rights on the topic. Before, a producer without produce rights waited out
``--flush-timeout`` asking "is a store running?" and a consumer without consume rights said
the topic was unknown: the stores refuse without a word to the client."""

from __future__ import annotations

from pathlib import Path

from dafka.server import free_port_pair
from dafka.transport.security import keygen
from tests.integration.cli.cli_run import dafka

ACL = """stores = ["tower"]
[[grant]]
keys = ["reports"]
consume = ["orders"]
"""


def test_a_key_without_rights_is_warned_before_joining(tmp_path: Path) -> None:
    auth = tmp_path / "authorized"
    for name in ("tower", "reports"):
        public, _ = keygen(tmp_path / "keys" / name)
        auth.mkdir(exist_ok=True)
        (auth / public.name).write_bytes(public.read_bytes())
    (tmp_path / "acl.toml").write_text(ACL)
    secured = [
        "--tower",
        f"127.0.0.1:{free_port_pair()}",  # nobody there: the check comes before joining
        "--key",
        str(tmp_path / "keys" / "reports.key_secret"),
        "--authorized-keys",
        str(auth),
        "--acl",
        str(tmp_path / "acl.toml"),
    ]
    produced = dafka("produce", "orders", *secured, stdin=b"x\n", timeout=90)
    assert "Warning: ACL" in produced.err, produced.err
    assert "grants this key (reports) no produce rights on 'orders'" in produced.err
    assert "Traceback" not in produced.err
    consumed = dafka("consume", "orders", "logs", *secured, "-e", timeout=90)
    assert "no consume rights on 'logs'" in consumed.err, consumed.err
    assert "on 'orders'" not in consumed.err  # granted: nothing said
    assert "Traceback" not in consumed.err
