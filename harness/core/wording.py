"""Counts in the words the user reads: "1 epoch", "2 epochs". By hand: English plurals of the few nouns depthbench
counts are a trailing s, and a dependency (inflect) for that would be heavier than the rule."""

from __future__ import annotations


def plural(n, noun: str) -> str:
    """``plural(1, "epoch")`` -> ``"1 epoch"``, ``plural(2.5, "epoch")`` -> ``"2.5 epochs"``."""
    number = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{number} {noun}" + ("" if n == 1 else "s")
