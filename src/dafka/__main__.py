"""``python -m dafka`` is the ``dafka`` command."""

from dafka.cli import main

main()
