"""Every pipeline's `paper` work (`common.paper_work`), each declared by its own pipeline: the root's
in `common.paper_work`, each paper's in `papers/<paper>/paper_work.py`."""

from __future__ import annotations

from collections.abc import Callable

from common import paper_work as root
from common.paper_work import ROOT, Work
from papers.blackmamba import paper_work as blackmamba
from papers.manticore import paper_work as manticore
from papers.masked_mixers import paper_work as masked_mixers

__all__ = ["PIPELINES", "ROOT", "Work"]

PIPELINES: dict[str, tuple[str, dict[str, Callable[[], list[Work]] | str]]] = {
    "root": ("dvc.yaml", root.STAGES),
    "blackmamba": ("papers/blackmamba/dvc.yaml", blackmamba.STAGES),
    "masked_mixers": ("papers/masked_mixers/dvc.yaml", masked_mixers.STAGES),
    "manticore": ("papers/manticore/dvc.yaml", manticore.STAGES),
}
