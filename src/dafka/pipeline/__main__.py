"""``python -m dafka.pipeline``: the same as ``dafka pipeline``."""

from dafka.pipeline import pipeline_command

pipeline_command(prog_name="python -m dafka.pipeline")
