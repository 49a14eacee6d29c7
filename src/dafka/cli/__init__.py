"""The ``dafka`` command. Sub-commands live in small modules of this package."""

from dafka.cli.main import main

__all__ = ["main"]
