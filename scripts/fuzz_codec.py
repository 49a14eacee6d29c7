"""Fuzz the Dafka wire codec for a while (the test suite runs 100,000 cases; this runs more).

    .venv/bin/python scripts/fuzz_codec.py --seconds 60 [--seed 1] [--processes 2]

Feeds random and mutated frame lists (truncation, bit flips, inserted and removed bytes,
extra, missing and swapped frames) to ``decode``, ``decode_data`` and ``decode_discovery``,
and stops at the first case where anything but ``DecodeError`` escapes, where the decoder's
last-resort fallback fires, or where a decoded message does not re-encode to the same frames.
Exit status 0 if no case failed. Each process uses its own seed (``--seed`` + index), so a
failure is replayed with ``--processes 1 --seed <that seed>``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys

from dafka.protocol import fuzzing


def _run(args: tuple[float, int | None, int]) -> tuple[int, fuzzing.FuzzStats | str]:
    seconds, cases, seed = args
    try:
        return seed, fuzzing.run(cases=cases, seconds=seconds, seed=seed)
    except Exception as exc:  # report any failure with its seed
        return seed, f"{type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fuzz the Dafka wire codec.")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each process runs")
    parser.add_argument("--cases", type=int, default=None, help="minimum cases per process")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first process")
    parser.add_argument("--processes", type=int, default=1, help="parallel fuzzing processes")
    args = parser.parse_args(argv)
    jobs = [(args.seconds, args.cases, args.seed + i) for i in range(args.processes)]
    if args.processes == 1:
        results = [_run(jobs[0])]
    else:
        with multiprocessing.Pool(args.processes) as pool:
            results = pool.map(_run, jobs)
    failed = False
    total = 0
    for seed, outcome in results:
        if isinstance(outcome, str):
            failed = True
            print(f"seed {seed}: FAILED {outcome}")
            continue
        total += outcome.cases
        print(
            f"seed {seed}: {outcome.cases:,} cases in {outcome.seconds:.1f} s "
            f"({outcome.cases / outcome.seconds:,.0f}/s): {outcome.decoded:,} decoded, "
            f"{outcome.refused:,} refused with DecodeError"
        )
    if failed:
        print("FAILED: replay a failing seed with --processes 1 --seed <seed>")
    else:
        print(f"ok: {total:,} cases without a failure")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
