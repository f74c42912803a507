"""What the sizing stages (`mad_sizing`, `lra_sizing`) share: from which budget a network is above
chance, and from which its accuracy has stopped rising."""

from __future__ import annotations

import math


def smallest(budgets: list[int], above: dict[int, bool]) -> int | None:
    """The smallest budget from which every larger one is above chance too; None when the largest is not."""
    found = None
    for budget in reversed(budgets):
        if not above[budget]:
            break
        found = budget
    return found


def rise_noise(accuracy: float, n: int) -> float:
    """Two standard errors of the difference between two runs' accuracies near `accuracy`, each
    scored on `n` examples: a later budget that scores less above this one is within noise."""
    return 2 * math.sqrt(2 * accuracy * (1 - accuracy) / n)


def flat_from(budgets: list[int], accuracy: dict[int, float], n: int) -> int | None:
    """The smallest budget that no larger one measured beats by more than `rise_noise`; None when
    only the largest qualifies, as nothing was measured after it to show it flat."""
    for i, budget in enumerate(budgets[:-1]):
        if all(accuracy[later] - accuracy[budget] <= rise_noise(accuracy[budget], n) for later in budgets[i + 1:]):
            return budget
    return None
