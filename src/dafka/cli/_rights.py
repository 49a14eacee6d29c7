"""A client command's own rights under its copy of the ACL, checked before it joins.

A store refuses what a key may not do without a word to the client (nothing stored, no
ACK; FETCHes and subscriptions refused): ``dafka produce`` then waited out
``--flush-timeout`` asking "is a store running?", and ``dafka consume`` said the topic was
unknown. The command holds the ACL file the stores enforce (docs/security.md: keep the
copies equal), so it can say why up front. A warning, not an error: the stores enforce
their own copies, which may grant more.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import click

from dafka.config import Acl, KeyFiles
from dafka.transport.security import KeyRing, Security

Action = Literal["produce", "consume"]

_REFUSED = {
    "produce": "the stores will refuse its records (nothing gets stored)",
    "consume": "the stores and producers will refuse its reads (nothing arrives)",
}


def warn_unless_granted(security: KeyFiles, action: Action, topics: Iterable[str]) -> None:
    """One ``Warning:`` line on stderr per topic that ``security``'s ACL does not let its key
    ``action``; nothing without a key or an ACL."""
    if security.key is None or security.acl is None:
        return
    loaded = Security.from_files(security)
    if loaded is None:
        return
    acl = Acl.load(security.acl)
    ring = KeyRing(loaded.authorized_keys)
    ring.refresh()
    names = ring.names(loaded.public_key)
    may = acl.may_produce if action == "produce" else acl.may_consume
    z85 = loaded.public_key.decode("ascii", "replace")
    label = ", ".join(sorted(names - {z85})) or z85
    for topic in topics:
        if not may(names, topic):
            click.echo(
                f"Warning: ACL {security.acl} grants this key ({label}) no {action} rights on "
                f"{topic!r}: {_REFUSED[action]} (docs/security.md)",
                err=True,
            )


__all__ = ["warn_unless_granted"]
