"""The ``dafka`` command group and its sub-commands."""

from __future__ import annotations

import click

from dafka import __version__


@click.group()
@click.version_option(__version__, prog_name="dafka")
def main() -> None:
    """dafka: decentralized, durable streaming over ZeroMQ."""


@main.command()
def demo() -> None:
    """Run the project's main job (grows with the project; see README)."""
    from dafka.protocol import Record, decode, encode

    records = [Record("hello", "P" * 32, seq, b"x" * 100) for seq in range(10_000)]
    decoded = [decode(encode(r)) for r in records]
    assert decoded == records
    click.echo(f"encoded and decoded {len(records)} RECORDs byte-exact")
