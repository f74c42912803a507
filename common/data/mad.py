"""MAD synthetic tasks (Mechanistic Architecture Design, arXiv 2403.17844): fast numpy generators.

Written from the facts in `shared/specs/manticore_mad_lra.md` §2.2-2.8, not from mad-lab code.
Every generator is vectorised (or, for fuzzy recall, a light per-instance loop over pre-drawn
randomness), draws only from one explicit `np.random.Generator`, and is deterministic per seed.

Tasks (names as in mad-lab; `_` is accepted for `-` in `setting`):

  in-context-recall        key/value pairs, then a probe key whose value must be recalled
  noisy-in-context-recall  the same with whole key/value slots replaced by noise tokens
  fuzzy-in-context-recall  keys and values are motifs (tuples of 1..k / 1..v distinct tokens)
  selective-copying        content tokens scattered among blanks must be copied after a copy token
  memorization             a fixed key -> value map, queried as [k, INS, k, INS, ...]
  compression              reconstruct the whole sequence (autoencoder targets)

Common conventions (spec §2.2):
  * ignore index -100 (`IGNORE_INDEX`) marks unscored target positions;
  * `generate(cfg)` draws the train split first and then the test split from the SAME generator
    `np.random.default_rng(cfg.seed)` (test continues the stream);
  * recall tasks: train targets are the inputs shifted by one (next-token loss on every
    position, no -100); test targets are -100 except where the answer is determined by the
    context (a value whose key was shown earlier, multi-query only, and the final probe value);
  * memorization, compression and selective copying use the same target format in both splits.

Vocabulary layouts (V = vocab_size, ns = "non-special" tokens, noise = noise_vocab_size):
  in-context / noisy recall  ns = (V if multi_query else V-1) - noise; keys [0, ns//2),
                             values [ns//2, ns), noise [ns, ns+noise); copy prefix V-1 (only
                             used, and only reserved, when multi_query is False).
  fuzzy recall               pad = V-1 (multi_query) or V-2 with copy prefix V-1;
                             ns = (V-1 if multi_query else V-2) - noise; halves as above.
  selective copying          content [0, V-2), blank V-2, copy token V-1.
  memorization               keys [0, (V-1)//2), values [(V-1)//2, V-1), insert token V-1.
  compression                content [0, V-1), compression token V-1 (last input position).

Sequence lengths (spec §2.3, so widths are NOT always `seq_len`; see `sequence_length`):
  in-context / noisy recall  seq_len - 1 if multi_query else seq_len (a length seq_len / seq_len+1
                             sequence, minus one for the shift); seq_len must be even.
  fuzzy recall               seq_len (left-padded to seq_len+1, minus one for the shift).
  the other three            seq_len.

Choices and differences from mad-lab (where the spec is silent or mad-lab has a flaw):
  * Fuzzy recall samples key/value motifs directly as uniform ordered tuples of distinct tokens
    (distributionally the same as shuffling all permutations, spec §2.8) - no enumeration.
    If the probe pair has not been inserted by the time the next chunk would end the context
    loop, it is inserted then, so the final probe's answer is always in the context.
    "Seen before" for scoring = the same key motif was emitted earlier in this sequence
    (the in-context probe pair counts). As in the spec, the in-context probe pair itself is
    never scored, even if its key happened to occur before it.
  * In-context recall: the slot protected from noise is drawn from the P-1 context slots
    (mad-lab draws from P slots, one of which is the probe, so rarely no slot is protected).
    Values are drawn per key up front (one value table per sequence), which is the same
    distribution as mad-lab's "draw on first use".
  * Selective copying uses the task's generator for the blank positions (mad-lab used the global
    numpy RNG) and honours `num_tokens_to_copy` (mad-lab before Dec 2024 silently used 16).
  * Memorization's map is derived from `cfg.seed` on its own stream,
    `np.random.default_rng([cfg.seed, MEMORIZATION_MAP_STREAM])`: value of key k is
    `rng.permutation(np.arange(n, V-1))[k]` with n = (V-1)//2. It does not depend on the split
    (mad-lab hard-codes seed 12345 and shuffles both keys and values; the same random bijection).
  * Leakage: `check_leakage` counts test inputs that occur verbatim in train. With
    `cfg.dedupe=True` (default) leaked test rows are redrawn from the same stream (up to
    `_MAX_DEDUPE_ROUNDS` rounds); `generate` reports the final count as `num_leaked`.
    For memorization the key -> value map is shared by design; leakage there means an identical
    query sequence (same keys in the same order), which is what is counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from dataclasses import dataclass, field, replace
from typing import Any, get_type_hints

import numpy as np

from common.config import check_bounds, check_value, seed_field
from common.errors import ConfigError

IGNORE_INDEX = -100
MEMORIZATION_MAP_STREAM = 0x6D656D  # second entropy word of the memorization-map generator
_MAX_DEDUPE_ROUNDS = 10

TASKS = (
    "in-context-recall",
    "noisy-in-context-recall",
    "fuzzy-in-context-recall",
    "selective-copying",
    "memorization",
    "compression",
)
_RECALL = ("in-context-recall", "noisy-in-context-recall", "fuzzy-in-context-recall")


# ----------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class MADTaskConfig:
    """One MAD task instance set. Fields a task does not use are ignored by it."""

    task: str
    vocab_size: int
    seq_len: int
    num_train_examples: int
    num_test_examples: int = 1280
    frac_noise: float = 0.0  # recall tasks: probability a slot/chunk is noise
    noise_vocab_size: int = 0  # recall tasks: tokens reserved for noise
    num_tokens_to_copy: int = 16  # selective copying
    k_motif_size: int = 3  # fuzzy recall: max key motif length
    v_motif_size: int = 3  # fuzzy recall: max value motif length
    multi_query: bool = True  # recall tasks: score every repeated key, not just the probe
    seed: int = seed_field(12345)
    dedupe: bool = True  # redraw test inputs that occur verbatim in train

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"unknown MAD task {self.task!r}; expected one of {TASKS}")
        if self.seq_len < 2 or self.vocab_size < 2:
            raise ValueError("seq_len and vocab_size must be at least 2")
        if self.num_train_examples < 1 or self.num_test_examples < 0:
            raise ValueError("num_train_examples must be at least 1 and num_test_examples at least 0")
        if not 0.0 <= self.frac_noise < 1.0:
            raise ValueError("frac_noise must be in [0, 1)")
        if self.frac_noise > 0 and self.noise_vocab_size < 1 and self.task in _RECALL:
            raise ValueError("frac_noise > 0 needs noise_vocab_size >= 1")
        if self.task in ("in-context-recall", "noisy-in-context-recall"):
            if self.seq_len % 2 or self.seq_len < 4:
                raise ValueError("in-context recall needs an even seq_len >= 4")
            ns = (self.vocab_size if self.multi_query else self.vocab_size - 1) - self.noise_vocab_size
            if ns < 2:
                raise ValueError("vocabulary too small for keys and values")
        if self.task == "fuzzy-in-context-recall":
            ns = self.vocab_size - (1 if self.multi_query else 2) - self.noise_vocab_size
            if ns // 2 < self.k_motif_size or ns - ns // 2 < self.v_motif_size:
                raise ValueError("vocabulary too small for the motif sizes")
            if min(self.k_motif_size, self.v_motif_size) < 1:
                raise ValueError("motif sizes must be >= 1")
            if self.seq_len < 3 * (self.k_motif_size + self.v_motif_size):
                raise ValueError("seq_len too short for fuzzy recall with these motif sizes")
        if self.task == "selective-copying":
            if self.vocab_size < 3:
                raise ValueError("selective copying needs vocab_size >= 3")
            if not 1 <= self.num_tokens_to_copy or self.seq_len <= 2 * self.num_tokens_to_copy + 1:
                raise ValueError("selective copying needs seq_len > 2 * num_tokens_to_copy + 1")
        if self.task == "memorization":
            if self.vocab_size < 3 or self.seq_len % 2:
                raise ValueError("memorization needs vocab_size >= 3 and an even seq_len")


def sequence_length(cfg: MADTaskConfig) -> int:
    """Width of the generated arrays (see module docstring)."""
    if cfg.task in ("in-context-recall", "noisy-in-context-recall") and cfg.multi_query:
        return cfg.seq_len - 1
    return cfg.seq_len


# ---- named settings: mad-lab baselines (spec §2.4) and Manticore's harder ones (spec §2.6)

MAD_BASELINE: dict[str, MADTaskConfig] = {
    "in-context-recall": MADTaskConfig("in-context-recall", 16, 128, 12800),
    "fuzzy-in-context-recall": MADTaskConfig("fuzzy-in-context-recall", 16, 128, 12800),
    "noisy-in-context-recall": MADTaskConfig(
        "noisy-in-context-recall", 32, 128, 12800, frac_noise=0.2, noise_vocab_size=16
    ),
    "selective-copying": MADTaskConfig("selective-copying", 16, 256, 12800, num_tokens_to_copy=16),
    "memorization": MADTaskConfig("memorization", 256, 32, 256),
    "compression": MADTaskConfig("compression", 16, 32, 12800),
}

MANTICORE_SETTINGS: dict[str, MADTaskConfig] = {
    "in-context-recall": MADTaskConfig("in-context-recall", 128, 128, 800),
    "fuzzy-in-context-recall": MADTaskConfig("fuzzy-in-context-recall", 128, 128, 800),
    "noisy-in-context-recall": MADTaskConfig(
        "noisy-in-context-recall", 144, 128, 800, frac_noise=0.8, noise_vocab_size=16
    ),
    # As configured (96); Manticore's runs effectively used 16, see MANTICORE_AS_RUN.
    "selective-copying": MADTaskConfig("selective-copying", 128, 256, 800, num_tokens_to_copy=96),
    "memorization": MADTaskConfig("memorization", 8192, 32, 256),
    "compression": MADTaskConfig("compression", 16, 32, 12800),  # listed, not run by Manticore
}

# What Manticore's vendored (pre-fix) mad-lab actually generated: num_tokens_to_copy ignored -> 16.
MANTICORE_AS_RUN: dict[str, MADTaskConfig] = {
    **MANTICORE_SETTINGS,
    "selective-copying": replace(MANTICORE_SETTINGS["selective-copying"], num_tokens_to_copy=16),
}

SETTINGS = {"mad_baseline": MAD_BASELINE, "manticore": MANTICORE_SETTINGS, "manticore_as_run": MANTICORE_AS_RUN}


def setting(name: str, task: str, **overrides) -> MADTaskConfig:
    """Named setting ('mad_baseline', 'manticore', 'manticore_as_run') for a task, with overrides."""
    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r}; expected one of {sorted(SETTINGS)}")
    task = task.replace("_", "-")
    if task not in SETTINGS[name]:
        raise ValueError(f"unknown MAD task {task!r}; expected one of {TASKS}")
    return replace(SETTINGS[name][task], **overrides)


def _check_task_fields(values: dict[str, Any], where: str) -> None:
    """Overrides of task fields: each a field of `MADTaskConfig`, of its type and within its bounds."""
    fields = {f.name: f for f in dataclasses.fields(MADTaskConfig) if f.name != "task"}
    hints = get_type_hints(MADTaskConfig)
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(f"{where}.{key}: unknown task field; allowed: {', '.join(fields)}")
        check_bounds(check_value(hints[key], value, f"{where}.{key}"), fields[key].metadata, f"{where}.{key}")


@dataclass
class MADSelection:
    """A list of named settings, `<setting set>/<task>` (e.g. `manticore/in-context-recall`), with
    `overrides` for every entry's task config and `task_overrides` for one task's; a config block
    that stages embed (the MAD suite, Manticore's MAD experiments)."""

    settings: list[str] = field(default_factory=lambda: [f"manticore_as_run/{t}" for t in TASKS])
    overrides: dict[str, Any] = field(default_factory=dict)
    task_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    def check(self) -> None:
        if not self.settings:
            raise ConfigError("settings: empty; list entries like manticore/in-context-recall")
        _check_task_fields(self.overrides, "overrides")
        for task, values in self.task_overrides.items():
            if task not in TASKS:
                raise ConfigError(f"task_overrides.{task}: unknown task; allowed: {', '.join(TASKS)}")
            _check_task_fields(values, f"task_overrides.{task}")
        self.tasks()  # every entry must build a valid task config

    def tasks(self) -> dict[str, MADTaskConfig]:
        out = {}
        for i, entry in enumerate(self.settings):
            where = f"settings[{i}]"
            name, sep, task = entry.partition("/")
            if not sep or name not in SETTINGS or task.replace("_", "-") not in TASKS:
                raise ConfigError(f"{where}: {entry!r} is not <setting set>/<task>; sets: "
                                  f"{', '.join(SETTINGS)}; tasks: {', '.join(TASKS)}")
            task = task.replace("_", "-")
            values = {**self.overrides, **self.task_overrides.get(task, {})}
            try:
                out[f"{name}/{task}"] = setting(name, task, **values)
            except (ValueError, TypeError) as err:
                raise ConfigError(f"{where} ({entry} with overrides {values}): {err}") from None
        if len(out) != len(self.settings):
            raise ConfigError("settings: an entry is listed twice")
        return out


# ----------------------------------------------------------------------------- helpers


def _distinct_tuples(rng: np.random.Generator, n_vocab: int, size: int, shape: tuple) -> np.ndarray:
    """Uniform ordered tuples of `size` distinct tokens from [0, n_vocab), shape (*shape, size).

    Sequential sampling without replacement: draw r_j ~ U[0, n_vocab - j) and skip past the
    tokens already chosen (in ascending order)."""
    out = np.empty((*shape, size), dtype=np.int64)
    for j in range(size):
        r = rng.integers(0, n_vocab - j, size=shape)
        for prev in np.sort(out[..., :j], axis=-1).transpose(-1, *range(len(shape))):
            r += r >= prev
        out[..., j] = r
    return out


def _seen_before(rows: np.ndarray) -> np.ndarray:
    """Boolean mask: element equals an element earlier in the same row."""
    order = np.argsort(rows, axis=1, kind="stable")
    s = np.take_along_axis(rows, order, axis=1)
    repeat = np.zeros_like(s, dtype=bool)
    repeat[:, 1:] = s[:, 1:] == s[:, :-1]
    out = np.empty_like(repeat)
    np.put_along_axis(out, order, repeat, axis=1)
    return out


def memorization_kv_map(cfg: MADTaskConfig) -> np.ndarray:
    """Fixed memorization map: array `m` with value `m[k]` for key k in [0, (V-1)//2)."""
    n = (cfg.vocab_size - 1) // 2
    rng = np.random.default_rng([cfg.seed, MEMORIZATION_MAP_STREAM])
    return rng.permutation(np.arange(n, cfg.vocab_size - 1, dtype=np.int64))[:n]


# ----------------------------------------------------------------------------- generators
# Each returns (inputs, targets) int64 arrays of shape [n, sequence_length(cfg)].


def _in_context_recall(cfg: MADTaskConfig, rng: np.random.Generator, n: int, train: bool):
    V, P, mq = cfg.vocab_size, cfg.seq_len // 2, cfg.multi_query
    ns = (V if mq else V - 1) - cfg.noise_vocab_size
    nk = ns // 2
    C = P - 1  # context pairs; the last pair is the probe
    rows = np.arange(n)[:, None]

    keys = rng.integers(0, nk, size=(n, C))
    value_of = rng.integers(nk, ns, size=(n, nk))  # one value per key per sequence
    values = value_of[rows, keys]
    noise = np.zeros((n, C), dtype=bool)
    if cfg.frac_noise > 0:
        noise = rng.random((n, C)) < cfg.frac_noise
        noise[np.arange(n), rng.integers(0, C, size=n)] = False  # at least one real pair
        noise_tok = rng.integers(ns, ns + cfg.noise_vocab_size, size=(n, C, 2))
    ctx = np.stack([keys, values], axis=-1)
    if cfg.frac_noise > 0:
        ctx = np.where(noise[..., None], noise_tok, ctx)

    # Probe: uniform over the distinct keys shown in this sequence.
    shown = np.zeros((n, nk), dtype=bool)
    shown[np.broadcast_to(rows, keys.shape)[~noise], keys[~noise]] = True
    score = np.where(shown, rng.random((n, nk)), -1.0)
    probe = score.argmax(axis=1)

    repeated = _seen_before(np.where(noise, -1 - np.arange(C), keys)) & ~noise
    ctx_tgt = np.full((n, C, 2), IGNORE_INDEX, dtype=np.int64)
    if mq:
        ctx_tgt[..., 1] = np.where(repeated, values, IGNORE_INDEX)

    prefix = np.empty((n, 0), dtype=np.int64) if mq else np.full((n, 1), V - 1, dtype=np.int64)
    tail = np.stack([probe, value_of[np.arange(n), probe]], axis=1)
    seq = np.concatenate([ctx.reshape(n, 2 * C), prefix, tail], axis=1)
    tgt = np.concatenate(
        [ctx_tgt.reshape(n, 2 * C), np.full_like(prefix, IGNORE_INDEX), np.full((n, 1), IGNORE_INDEX), tail[:, 1:]],
        axis=1,
    )
    return seq[:, :-1], (seq[:, 1:] if train else tgt[:, 1:])


@contextlib.contextmanager
def _cycle_collector_paused():
    """The fuzzy-recall loop allocates millions of small lists and tuples, none in a cycle, and each
    collection they trigger scans every object the process holds: with torch imported (170k
    objects) generation ran 3x slower (0.88 s against 0.25 s for 2,080 instances here)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fuzzy_in_context_recall(cfg: MADTaskConfig, rng: np.random.Generator, n: int, train: bool):
    V, L, mq = cfg.vocab_size, cfg.seq_len, cfg.multi_query
    K, Vm = cfg.k_motif_size, cfg.v_motif_size
    pad = V - 1 if mq else V - 2
    ns = (V - 1 if mq else V - 2) - cfg.noise_vocab_size
    nk = ns // 2
    T = L // 2  # iterations add >= 2 tokens each, so at most L//2 are needed

    # All randomness is pre-drawn in fixed shapes (unused draws are simply discarded).
    k_size = rng.integers(1, K + 1, size=(n, T + 1)) if train else np.full((n, T + 1), K)
    v_size = rng.integers(1, Vm + 1, size=(n, T + 1))
    key_motifs = _distinct_tuples(rng, nk, K, (n, T + 1))
    val_motifs = nk + _distinct_tuples(rng, ns - nk, Vm, (n, T + 1))
    is_noise = rng.random((n, T)) < cfg.frac_noise
    noise_tok = ns + rng.integers(0, max(cfg.noise_vocab_size, 1), size=(n, T, K + Vm))
    probe_room = L - 2 * (k_size[:, T] + v_size[:, T])  # probe index ~ U[0, probe_room)
    probe_idx = (rng.random(n) * probe_room).astype(np.int64)

    inputs = np.full((n, L + 1), pad, dtype=np.int64)
    targets = np.full((n, L + 1), IGNORE_INDEX, dtype=np.int64)
    with _cycle_collector_paused():
        lists = [a.tolist() for a in (k_size, v_size, key_motifs, val_motifs, is_noise, noise_tok, probe_idx)]
        for i, (ks, vs, km, vm, nz, nt, pidx) in enumerate(zip(*lists)):
            pkey, pval = tuple(km[T][: ks[T]]), tuple(vm[T][: vs[T]])
            stop = L - len(pkey) - len(pval) - (K + Vm)
            value_of = {pkey: pval}
            seen: set = set()
            seq: list = []
            tgt: list = []
            inserted = False
            for j in range(T):
                if len(seq) >= stop:
                    break
                if not inserted and (len(seq) >= pidx or len(seq) + ks[j] + vs[j] >= stop):
                    seq += pkey + pval
                    tgt += [IGNORE_INDEX] * (len(pkey) + len(pval))
                    seen.add(pkey)
                    inserted = True
                elif nz[j]:
                    seq += nt[j][: ks[j] + vs[j]]
                    tgt += [IGNORE_INDEX] * (ks[j] + vs[j])
                else:
                    key = tuple(km[j][: ks[j]])
                    val = value_of.setdefault(key, tuple(vm[j][: vs[j]]))
                    seq += key + val
                    tgt += [IGNORE_INDEX] * len(key)
                    tgt += list(val) if (mq and key in seen) else [IGNORE_INDEX] * len(val)
                    seen.add(key)
            prefix = [] if mq else [V - 1]
            seq += prefix + list(pkey + pval)
            tgt += [IGNORE_INDEX] * (len(prefix) + len(pkey)) + list(pval)
            inputs[i, L + 1 - len(seq) :] = seq  # left-pad to L + 1
            targets[i, L + 1 - len(tgt) :] = tgt
    return inputs[:, :-1], (inputs[:, 1:] if train else targets[:, 1:])


def _selective_copying(cfg: MADTaskConfig, rng: np.random.Generator, n: int, train: bool):
    V, L, k = cfg.vocab_size, cfg.seq_len, cfg.num_tokens_to_copy
    blank, copy = V - 2, V - 1
    num_blank = L - 2 * k - 1
    to_copy = rng.integers(0, V - 2, size=(n, k))
    # Each blank goes before a uniformly chosen content token (np.insert at randint(0, k)).
    slot = rng.integers(0, k, size=(n, num_blank))
    counts = np.bincount((slot + k * np.arange(n)[:, None]).ravel(), minlength=n * k).reshape(n, k)
    pos = np.arange(k) + np.cumsum(counts, axis=1)
    inputs = np.full((n, L), blank, dtype=np.int64)
    inputs[np.arange(n)[:, None], pos] = to_copy
    inputs[:, L - k - 1] = copy
    targets = np.full((n, L), IGNORE_INDEX, dtype=np.int64)
    targets[:, L - k :] = to_copy
    return inputs, targets


def _memorization(cfg: MADTaskConfig, rng: np.random.Generator, n: int, train: bool):
    kv = memorization_kv_map(cfg)
    keys = rng.integers(0, len(kv), size=(n, cfg.seq_len // 2))
    inputs = np.stack([keys, np.full_like(keys, cfg.vocab_size - 1)], axis=-1).reshape(n, cfg.seq_len)
    targets = np.stack([np.full_like(keys, IGNORE_INDEX), kv[keys]], axis=-1).reshape(n, cfg.seq_len)
    return inputs, targets


def _compression(cfg: MADTaskConfig, rng: np.random.Generator, n: int, train: bool):
    inputs = np.empty((n, cfg.seq_len), dtype=np.int64)
    inputs[:, :-1] = rng.integers(0, cfg.vocab_size - 1, size=(n, cfg.seq_len - 1))
    inputs[:, -1] = cfg.vocab_size - 1
    return inputs, inputs.copy()


_GENERATORS = {
    "in-context-recall": _in_context_recall,
    "noisy-in-context-recall": _in_context_recall,
    "fuzzy-in-context-recall": _fuzzy_in_context_recall,
    "selective-copying": _selective_copying,
    "memorization": _memorization,
    "compression": _compression,
}


# ----------------------------------------------------------------------------- public API


def _leaked_rows(train_inputs: np.ndarray, test_inputs: np.ndarray) -> np.ndarray:
    train_rows = {row.tobytes() for row in np.ascontiguousarray(train_inputs, dtype=np.int64)}
    test = np.ascontiguousarray(test_inputs, dtype=np.int64)
    return np.array([row.tobytes() in train_rows for row in test], dtype=bool)


def check_leakage(data: dict) -> int:
    """Number of test inputs that occur verbatim in the train inputs (see module docstring for
    what this means for memorization)."""
    return int(_leaked_rows(data["train_inputs"], data["test_inputs"]).sum())


def generate(cfg: MADTaskConfig) -> dict:
    """Train then test split from one generator seeded with `cfg.seed`.

    Returns int64 arrays `train_inputs, train_targets, test_inputs, test_targets` of shape
    [N, sequence_length(cfg)] and `num_leaked` (test inputs still found in train)."""
    rng = np.random.default_rng(cfg.seed)
    gen = _GENERATORS[cfg.task]
    train_x, train_y = gen(cfg, rng, cfg.num_train_examples, True)
    test_x, test_y = gen(cfg, rng, cfg.num_test_examples, False)
    leaked = _leaked_rows(train_x, test_x)
    for _ in range(_MAX_DEDUPE_ROUNDS if cfg.dedupe else 0):
        idx = np.flatnonzero(leaked)
        if idx.size == 0:
            break
        test_x[idx], test_y[idx] = gen(cfg, rng, idx.size, False)
        leaked = _leaked_rows(train_x, test_x)
    return {
        "train_inputs": train_x.astype(np.int64, copy=False),
        "train_targets": train_y.astype(np.int64, copy=False),
        "test_inputs": test_x.astype(np.int64, copy=False),
        "test_targets": test_y.astype(np.int64, copy=False),
        "num_leaked": int(leaked.sum()),
    }


# ----------------------------------------------------------------------------- metrics


def _as_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _preds_and_targets(logits_or_preds, targets):
    preds, targets = _as_numpy(logits_or_preds), _as_numpy(targets)
    if preds.ndim == targets.ndim + 1:
        preds = preds.argmax(axis=-1)
    if preds.shape != targets.shape:
        raise ValueError(f"predictions {preds.shape} do not match targets {targets.shape}")
    mask = targets != IGNORE_INDEX
    if not mask.any():
        raise ValueError("no scored positions (all targets are -100)")
    return preds[mask], targets[mask]


def accuracy(logits_or_preds, targets) -> float:
    """Micro token accuracy over scored positions (targets != -100); Manticore's metric.

    Accepts logits [..., C] (argmax is taken) or predicted ids with the targets' shape."""
    p, t = _preds_and_targets(logits_or_preds, targets)
    return float((p == t).mean())


def class_averaged_accuracy(logits_or_preds, targets, torchmetrics_compat: bool = False) -> float:
    """Macro accuracy over scored positions: mean over classes of per-class recall
    tp_c / (tp_c + fn_c) (mad-lab logs torchmetrics `MulticlassAccuracy(average="macro",
    ignore_index=-100)`).

    Default: the mean runs over the classes that occur in the scored targets.
    `torchmetrics_compat=True`: also include classes that are only predicted (never a target),
    each with recall 0 - torchmetrics' rule, which drops only classes with tp+fp+fn == 0
    (checked equal to torchmetrics 1.9 `MulticlassAccuracy(num_classes=V, ignore_index=-100)`)."""
    p, t = _preds_and_targets(logits_or_preds, targets)
    classes = np.unique(np.concatenate([t, p])) if torchmetrics_compat else np.unique(t)
    recalls = [float((p[t == c] == c).mean()) if (t == c).any() else 0.0 for c in classes]
    return float(np.mean(recalls))


def mad_score(results: dict) -> float:
    """Mean over tasks of the task accuracies. A task's value may be one accuracy or a sequence
    of accuracies over task settings (averaged first, as in mad-lab's per-task score)."""
    if not results:
        raise ValueError("mad_score needs at least one task")
    return float(np.mean([np.mean(np.asarray(v, dtype=float)) for v in results.values()]))
