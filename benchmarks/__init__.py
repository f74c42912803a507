"""Performance comparisons against named peers; each script writes benchmarks/results/<name>.json."""

from __future__ import annotations

import argparse


def nonnegative_int(text: str) -> int:
    """An argparse type: a whole number of at least 0 (warm-up repetitions)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (sizes, lengths, repetitions, threads)."""
    value = nonnegative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def positive_ints(text: str) -> list[int]:
    """An argparse type: a comma-separated list of whole numbers of at least 1."""
    return [positive_int(part) for part in text.split(",")]
