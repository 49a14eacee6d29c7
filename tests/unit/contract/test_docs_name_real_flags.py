"""Every ``dafka COMMAND ... --flag`` that the docs and docstrings show is a flag of COMMAND.

Issue 22: a docstring in ``client/_settings.py`` named a ``dafka tower --port`` that never
existed. The README, ``docs/*.md`` and every module under ``src/dafka`` are scanned: inline
code (``dafka up --port``, in single or double backticks) and the lines of ``sh`` blocks;
each flag after a command name must be one of that command's options (click's own table).
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from dafka.cli import main as group

ROOT = Path(__file__).resolve().parents[3]
_SPAN = re.compile(r"``?([^`\n]*\bdafka [a-z]+[^`\n]*)``?")
_SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
_CALL = re.compile(r"\bdafka ([a-z]+)((?:\s+(?!dafka\b)[^\s|;&]+)*)")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def _calls(text: str) -> list[str]:
    found = [m.group(1) for m in _SPAN.finditer(text)]
    for block in _SH_BLOCK.finditer(text):
        found += [line.split("#")[0] for line in block.group(1).splitlines()]
    return found


def unknown_flags(text: str) -> list[tuple[str, str]]:
    """(command, flag) for every flag shown after a ``dafka COMMAND`` it does not take."""
    bad = []
    for call in _calls(text):
        for found in _CALL.finditer(call):
            command = group.commands.get(found.group(1))
            if not isinstance(command, click.Command):
                continue  # prose ("dafka has..."), not a command
            if isinstance(command, click.Group):  # `dafka topics delete T --yes`
                words = found.group(2).split()
                sub = command.commands.get(words[0]) if words else None
                if sub is not None:
                    command = sub
            known = {"--help"}
            for param in command.params:
                known.update(getattr(param, "opts", []), getattr(param, "secondary_opts", []))
            bad += [(found.group(1), f) for f in _FLAG.findall(found.group(2)) if f not in known]
    return bad


def test_the_docs_and_docstrings_name_only_flags_that_exist() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    pages += sorted((ROOT / "src" / "dafka").rglob("*.py"))
    bad = {str(p.relative_to(ROOT)): unknown_flags(p.read_text()) for p in pages}
    assert {page: flags for page, flags in bad.items() if flags} == {}
    assert sum(len(_calls(p.read_text())) for p in pages) > 50  # it looked at something


def test_the_check_sees_an_unknown_flag() -> None:
    """The docstring issue 22 found, and the forms that are right."""
    assert unknown_flags("its XPUB is ``port + 1``, as ``dafka tower --port`` binds it") == [
        ("tower", "--port")
    ]
    assert unknown_flags("`dafka up --port 6000` and `dafka tower --sub tcp://*:1`") == []
    assert unknown_flags("`dafka topics delete T --yes` and `dafka topics --json`") == []
    assert unknown_flags("`dafka topics describe T --yes`") == [("topics", "--yes")]
    assert unknown_flags("```sh\nseq 3 | dafka produce t --no-batching  # --bogus\n```") == []
