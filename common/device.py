"""Where a stage computes what it runs outside Lightning's `fit` (scoring, generation, embeddings,
hand-written training loops): the GPU when there is one. Lightning hands a network back on the CPU
after `fit`, so a stage that does not move it would score a `paper` model on one CPU thread."""

from __future__ import annotations

import torch


def compute_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
