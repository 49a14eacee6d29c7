"""Errors a user can catch by name (issue 20): every ``DafkaError`` subclass is either exported
by the front door (``from dafka import ...``) and listed in docs/client.md's Errors table, or
one of the lower layers' errors named there as never raised by a public call."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import dafka
from dafka.errors import DafkaError

DOCS = Path(__file__).resolve().parents[3] / "docs" / "client.md"

LOWER_LAYERS = {
    "dafka.protocol": "the wire codec: the clients check names and sizes before encoding",
    "dafka.storage": "a store's log, in the store's own process",
    "dafka.message": "the exactly-once message layer under the clients",
    "dafka.spark": "raised inside Spark tasks; the user sees Spark's error",
    "dafka.testing": "test helpers",
}
"""Packages whose own errors no front-door call raises, and why."""

NOT_RAISED = {
    "DroppedRecordError": "the consumer counts and skips such a RECORD",
    "CorruptCommitError": "a group's offsets reader counts and skips such a commit record",
}
"""Exceptions to the rule inside packages that are otherwise public, and why."""


def _all_subclasses() -> set[type[DafkaError]]:
    for module in pkgutil.walk_packages(dafka.__path__, "dafka."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: set[type[DafkaError]] = set()
    todo: list[type[DafkaError]] = [DafkaError]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.add(cls)
            todo += cls.__subclasses__()
    return found


def _errors_section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    return text[text.index("## Errors\n") : text.index("## asyncio\n")]


def _package(cls: type) -> str:
    return ".".join(cls.__module__.split(".")[:2])


def test_every_dafka_error_is_exported_and_documented() -> None:
    section = _errors_section()
    listed = set(re.findall(r"^\| `(\w+)`", section, re.MULTILINE))
    missing = []
    for cls in sorted(_all_subclasses(), key=lambda c: c.__name__):
        name = cls.__name__
        if _package(cls) in LOWER_LAYERS or name in NOT_RAISED:
            if f"`{name}`" not in section and _package(cls) not in section:
                missing.append(f"{name} ({cls.__module__}): its package is not in the Errors")
            continue
        if getattr(dafka, name, None) is not cls or name not in dafka.__all__:
            missing.append(f"{name} ({cls.__module__}) is not exported by dafka")
        if name not in listed:
            missing.append(f"{name} ({cls.__module__}) is not listed in docs/client.md's Errors")
    assert not missing, "\n".join(missing)


def test_every_listed_error_is_exported() -> None:
    listed = set(re.findall(r"^\| `(\w+)`", _errors_section(), re.MULTILINE))
    assert listed
    for name in listed:
        assert issubclass(getattr(dafka, name), DafkaError), name
