"""What the sizing stages (`mad_sizing`, `lra_sizing`) share: from which budget a network is above chance."""

from __future__ import annotations


def smallest(budgets: list[int], above: dict[int, bool]) -> int | None:
    """The smallest budget from which every larger one is above chance too; None when the largest is not."""
    found = None
    for budget in reversed(budgets):
        if not above[budget]:
            break
        found = budget
    return found
