"""``python -m dafka.pipeline``: the same as ``dafka pipeline``."""

from dafka.pipeline._cli import pipeline

pipeline(prog_name="python -m dafka.pipeline")
