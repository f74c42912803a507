"""ListOps: nested list operations on digits, generated locally to the Long Range Arena recipe.

A sample is a prefix expression such as ``[MAX 2 9 [MIN 4 7 ] 0 ]``; its label is its value (0-9).

Operators (each opens a bracket that a ``]`` closes)::

    [MIN  minimum of the arguments
    [MAX  maximum of the arguments
    [MED  median, computed as LRA does: int(np.median(args)). For an even count that is the mean
          of the two middle values truncated, i.e. (a + b) // 2 (all values are non-negative).
    [SM   sum modulo 10

Vocabulary (18 ids, the size Manticore/S4 use; the order is ours, the S4 loader builds it from
train-set frequencies)::

    0 <pad>   1 <unk>   2 <eos>
    3 [MIN    4 [MAX    5 [MED    6 [SM    7 ]
    8..17 the digits 0..9

Conventions
-----------
- Brackets are real tokens. LRA's first release deleted the brackets during tokenisation, which
  leaves an expression that cannot be parsed back; its 2021 fix replaced ``]`` by ``X`` and
  dropped only the pair-wrapping parentheses. We keep ``]`` as it is; `encode` also accepts LRA's
  form (``X`` for ``]``, stray ``(``/``)`` ignored).
- Length = number of operator, ``]`` and digit tokens (LRA's count; ``<eos>`` is not counted). A
  sample is kept iff ``min_len <= length <= max_len``.
- Depth = tree depth with the root at depth 1 and leaves counted, as in LRA: an operator may open
  only at depth < max_depth, so brackets nest at most ``max_depth - 1`` deep.
- Each node is a digit leaf with probability 0.75 and an operator with probability 0.25
  (LRA's VALUE_P), with 2..max_args arguments (inclusive) and an operator drawn uniformly.
- Deterministic from ``seed`` (a ``np.random.Generator``); duplicates are dropped.

Differences from the LRA generator (``lra_benchmarks/data/listops.py``)
--------------------------------------------------------------------
- Our own code: tokens are emitted in prefix order and evaluated in the same pass.
- The root is always an operator (a one-digit tree is rejected anyway, so the accepted
  distribution is unchanged) and a tree is abandoned as soon as it grows past ``max_len``,
  instead of being built in full and then rejected.
- The length band is inclusive (LRA: strict ``min_length < length < max_length``).
- Samples come out in generation order, not in a Python set's iteration order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"
OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
CLOSE = "]"
DIGITS = tuple(str(d) for d in range(10))

VOCAB: tuple[str, ...] = (PAD, UNK, EOS, *OPERATORS, CLOSE, *DIGITS)
TOKEN_TO_ID: dict[str, int] = {tok: i for i, tok in enumerate(VOCAB)}
VOCAB_SIZE = len(VOCAB)  # 18
PAD_ID, UNK_ID, EOS_ID = TOKEN_TO_ID[PAD], TOKEN_TO_ID[UNK], TOKEN_TO_ID[EOS]
NUM_CLASSES = 10

VALUE_P = 0.25  # probability that a node (below max depth) is an operator
PAPER_MIN_LEN, PAPER_MAX_LEN = 500, 2000


# ---------------------------------------------------------------------------------------------
# Operator semantics
# ---------------------------------------------------------------------------------------------


def apply_op(op: str, args: Sequence[int]) -> int:
    """Value of one operator node. MED follows LRA: int(np.median(args)) (even count: truncated mean)."""
    if op == "[MIN":
        return min(args)
    if op == "[MAX":
        return max(args)
    if op == "[MED":
        s = sorted(args)
        mid = len(s) // 2
        return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) // 2
    if op == "[SM":
        return sum(args) % 10
    raise ValueError(f"unknown ListOps operator {op!r}")


def evaluate(tokens: Sequence[str]) -> int:
    """Value of a token sequence (stack-based; the tests carry their own recursive evaluator)."""
    stack: list[tuple[str, list[int]]] = []
    result = None
    for tok in tokens:
        if tok in OPERATORS:
            stack.append((tok, []))
        elif tok == CLOSE:
            if not stack:
                raise ValueError("unbalanced ']'")
            op, args = stack.pop()
            value = apply_op(op, args)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        elif tok in DIGITS:
            if stack:
                stack[-1][1].append(int(tok))
            else:
                result = int(tok)
        else:
            raise ValueError(f"unexpected token {tok!r}")
    if stack or result is None:
        raise ValueError("unbalanced or empty expression")
    return result


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------


class _TooLong(Exception):
    pass


def _emit_operator(rng: np.random.Generator, out: list[str], depth: int, max_depth: int,
                   max_args: int, max_len: int) -> tuple[int, int]:
    """Append one operator node (at `depth`) and its subtree to `out`; return (value, subtree depth)."""
    op = OPERATORS[int(rng.integers(len(OPERATORS)))]
    n_args = int(rng.integers(2, max_args + 1))
    out.append(op)
    values, deepest = [], depth + 1  # leaves sit one level below
    for _ in range(n_args):
        if depth + 1 < max_depth and rng.random() < VALUE_P:
            value, sub_depth = _emit_operator(rng, out, depth + 1, max_depth, max_args, max_len)
            deepest = max(deepest, sub_depth)
        else:
            value = int(rng.integers(10))
            out.append(DIGITS[value])
        values.append(value)
        if len(out) > max_len:
            raise _TooLong
    out.append(CLOSE)
    if len(out) > max_len:
        raise _TooLong
    return apply_op(op, values), deepest


def sample_expression(rng: np.random.Generator, max_len: int, max_depth: int = 10,
                      max_args: int = 10) -> tuple[list[str], int, int] | None:
    """One random tree as (tokens, value, depth), or None if it outgrew `max_len`."""
    out: list[str] = []
    try:
        value, depth = _emit_operator(rng, out, 1, max_depth, max_args, max_len)
    except _TooLong:
        return None
    return out, value, depth


def generate_listops(n: int, seed: int, min_len: int = PAPER_MIN_LEN, max_len: int = PAPER_MAX_LEN,
                     max_depth: int = 10, max_args: int = 10, max_tries: int | None = None) -> dict:
    """`n` distinct expressions with ``min_len <= length <= max_len``.

    Returns a dict of equal-length fields: ``tokens`` (list of token-string lists), ``label``
    (int64 [n]), ``length`` (int64 [n]) and ``depth`` (int64 [n], root = 1, leaves counted).
    """
    if max_depth < 2 or max_args < 2 or not 1 <= min_len <= max_len:
        raise ValueError("need max_depth >= 2, max_args >= 2 and 1 <= min_len <= max_len")
    rng = np.random.default_rng(seed)
    max_tries = max_tries if max_tries is not None else 1000 * n + 10_000
    seen: set[tuple[str, ...]] = set()
    tokens, labels, depths = [], [], []
    tries = 0
    while len(tokens) < n:
        tries += 1
        if tries > max_tries:
            raise RuntimeError(f"only {len(tokens)}/{n} ListOps samples after {max_tries} tries; "
                               "widen the length band or raise max_depth/max_args")
        sample = sample_expression(rng, max_len, max_depth, max_args)
        if sample is None or len(sample[0]) < min_len:
            continue
        toks, value, depth = sample
        key = tuple(toks)
        if key in seen:
            continue
        seen.add(key)
        tokens.append(toks)
        labels.append(value)
        depths.append(depth)
    return {
        "tokens": tokens,
        "label": np.asarray(labels, dtype=np.int64),
        "length": np.asarray([len(t) for t in tokens], dtype=np.int64),
        "depth": np.asarray(depths, dtype=np.int64),
    }


# ---------------------------------------------------------------------------------------------
# Tokenisation
# ---------------------------------------------------------------------------------------------


def _split(expr: str | Iterable[str]) -> list[str]:
    parts = expr.split() if isinstance(expr, str) else list(expr)
    out = []
    for tok in parts:
        tok = tok.strip("()")  # LRA's pair-wrapping parentheses carry no information
        if not tok:
            continue
        out.append(CLOSE if tok == "X" else tok)
    return out


def encode(expr: str | Iterable[str], add_eos: bool = False) -> list[int]:
    """Token ids of an expression (a whitespace-separated string or a token list). Unknown -> <unk>."""
    ids = [TOKEN_TO_ID.get(tok, UNK_ID) for tok in _split(expr)]
    return ids + [EOS_ID] if add_eos else ids


def decode(ids: Iterable[int]) -> str:
    """Whitespace-joined tokens; <pad> and <eos> are dropped, ids outside the vocab become <unk>."""
    toks = []
    for i in ids:
        i = int(i)
        if i in (PAD_ID, EOS_ID):
            continue
        toks.append(VOCAB[i] if 0 <= i < VOCAB_SIZE else UNK)
    return " ".join(toks)


def to_arrays(samples: dict, n_ctx: int, add_eos: bool = True) -> dict:
    """Right-padded ``input_ids`` int64 [n, n_ctx], ``mask`` bool (True on real tokens, <eos>
    included) and ``labels`` int64 [n]. A sample that does not fit raises; nothing is truncated."""
    seqs = [encode(toks, add_eos=add_eos) for toks in samples["tokens"]]
    longest = max((len(s) for s in seqs), default=0)
    if longest > n_ctx:
        raise ValueError(f"a ListOps sample has {longest} tokens, more than n_ctx={n_ctx}")
    ids = np.full((len(seqs), n_ctx), PAD_ID, dtype=np.int64)
    mask = np.zeros((len(seqs), n_ctx), dtype=bool)
    for row, seq in enumerate(seqs):
        ids[row, :len(seq)] = seq
        mask[row, :len(seq)] = True
    return {"input_ids": ids, "mask": mask, "labels": np.asarray(samples["label"], dtype=np.int64)}
