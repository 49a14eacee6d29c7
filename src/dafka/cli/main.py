"""The ``dafka`` command group and its sub-commands."""

from __future__ import annotations

import click

from dafka import __version__
from dafka.cli.daemon import run_until_signal, setup_logging


@click.group()
@click.version_option(__version__, prog_name="dafka")
def main() -> None:
    """dafka: decentralized, durable streaming over ZeroMQ."""


@main.command()
@click.option(
    "--sub",
    "sub_address",
    default="tcp://*:5556",
    show_default=True,
    help="tower/sub_address: where nodes send their beacons (XSUB).",
)
@click.option(
    "--pub",
    "pub_address",
    default="tcp://*:5557",
    show_default=True,
    help="tower/pub_address: where nodes receive beacons (XPUB).",
)
@click.option("-v", "--verbose", is_flag=True)
def tower(sub_address: str, pub_address: str, verbose: bool) -> None:
    """Run a tower: the beacon forwarder nodes use to find each other."""
    from dafka.transport.tower import Tower

    setup_logging(verbose)
    t = Tower(sub_address, pub_address)
    run_until_signal(t.start, t.stop)


@main.command()
def demo() -> None:
    """Run the project's main job (grows with the project; see README)."""
    from dafka.protocol import Record, decode, encode

    records = [Record("hello", "P" * 32, seq, b"x" * 100) for seq in range(10_000)]
    decoded = [decode(encode(r)) for r in records]
    if decoded != records:
        raise click.ClickException("codec round trip failed")
    click.echo(f"encoded and decoded {len(records)} RECORDs byte-exact")
