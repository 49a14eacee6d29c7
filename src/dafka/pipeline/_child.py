"""Entry point of the pipeline's child processes: ``python -m dafka.pipeline._child KIND CFG``."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("feed", "job"):
        sys.stderr.write("usage: python -m dafka.pipeline._child feed|job CONFIG_JSON\n")
        return 2
    kind, config = argv
    if kind == "feed":
        from dafka.pipeline._feed import FeedConfig
        from dafka.pipeline._feed import run as run_feed

        return run_feed(FeedConfig.from_json(config))
    from dafka.pipeline._job import JobConfig
    from dafka.pipeline._job import run as run_job

    return run_job(JobConfig.from_json(config))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
