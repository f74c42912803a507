"""Per-token generation latency and cache memory of a `LanguageModel` against generated length.

Batch 1, greedy, from a one-token prompt, each token one cached step (`model(token, cache)`).
Latency at length n is the median step time in a window of `window` tokens ending at n (the
first tokens use what is there); memory is the bytes the generation cache holds at n, where a KV
cache counts only its filled part and a recurrent state counts whole.
"""

from __future__ import annotations

import statistics
import time

import torch

from common.blocks.attention import KVCache
from common.models.lm import LanguageModel


def cache_bytes(cache, position: int) -> int:
    total = 0
    for layer in cache.layers:
        if layer is None:
            continue
        if isinstance(layer, KVCache):
            total += 2 * layer.k[:, :, :position].numel() * layer.k.element_size()
        else:
            total += sum(t.numel() * t.element_size() for t in vars(layer).values() if isinstance(t, torch.Tensor))
    return total


@torch.no_grad()
def generation_profile(model: LanguageModel, lengths: list[int], window: int = 32) -> dict:
    """{str(n): {ms_per_token, cache_bytes, total_s}} for each n in `lengths`, plus overall tokens/s.
    `total_s` is the time to generate the whole sequence of n tokens (the paper's Figure 5 axis)."""
    if not model.supports_cache:
        raise ValueError("generation_profile needs blocks that all support cached steps")
    max_len = max(lengths) + 1
    cache = model.allocate_cache(1, max_len)
    token = torch.zeros(1, 1, dtype=torch.long, device=model.embed.weight.device)
    model(token, cache)  # the one-token prompt
    times = []
    for _ in range(max(lengths)):
        start = time.perf_counter()
        token = model(token, cache)[:, -1:].argmax(-1)
        times.append(time.perf_counter() - start)
    rows = {}
    for n in lengths:
        steps = times[max(0, n - window):n]
        rows[str(n)] = {"ms_per_token": 1e3 * statistics.median(steps), "cache_bytes": cache_bytes(cache, n),
                        "total_s": sum(times[:n])}
    rows["tokens_per_s_overall"] = len(times) / sum(times)
    return rows
