"""ListOps generator: labels re-derived by an independent recursive evaluator, brackets kept as tokens."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from common.data import listops

OPS = {"[MIN", "[MAX", "[MED", "[SM"}


def parse(tokens: list[str], i: int = 0, depth: int = 1) -> tuple[int, int, int, int]:
    """Recursive descent over prefix tokens -> (value, next index, tree depth, widest node)."""
    tok = tokens[i]
    if tok.isdigit():
        return int(tok), i + 1, depth, 0
    assert tok in OPS, tok
    args, i, deepest, widest = [], i + 1, depth + 1, 0
    while tokens[i] != "]":
        value, i, sub_depth, sub_wide = parse(tokens, i, depth + 1)
        args.append(value)
        deepest, widest = max(deepest, sub_depth), max(widest, sub_wide)
    widest = max(widest, len(args))
    if tok == "[MIN":
        value = min(args)
    elif tok == "[MAX":
        value = max(args)
    elif tok == "[SM":
        value = sum(args) % 10
    else:  # LRA: int(np.median(args)) -- the mean of the two middle values, truncated
        value = int(statistics.median(args))
    return value, i + 1, deepest, widest


@pytest.fixture(scope="module")
def tiny():
    return generate()


def generate(**kw):
    args = dict(n=300, seed=7, min_len=50, max_len=200, max_depth=6, max_args=5) | kw
    return listops.generate_listops(**args)


def test_labels_match_independent_evaluator(tiny):
    for toks, label, depth in zip(tiny["tokens"], tiny["label"], tiny["depth"]):
        value, end, tree_depth, widest = parse(toks)
        assert end == len(toks)
        assert value == label
        assert tree_depth == depth <= 6
        assert 2 <= widest <= 5
    assert set(np.unique(tiny["label"])) == set(range(10))


def test_length_band(tiny):
    lengths = np.array([len(t) for t in tiny["tokens"]])
    assert (lengths == tiny["length"]).all()
    assert lengths.min() >= 50 and lengths.max() <= 200


def test_brackets_are_tokens_and_balanced(tiny):
    for toks in tiny["tokens"]:
        assert sum(t in OPS for t in toks) == toks.count("]") > 0
        level = 0
        for t in toks:
            level += (t in OPS) - (t == "]")
            assert level >= 0
        assert level == 0
        ids = listops.encode(toks)
        assert listops.decode(ids) == " ".join(toks)
        assert ids.count(listops.TOKEN_TO_ID["]"]) == sum(i in (3, 4, 5, 6) for i in ids)


def test_dedup_and_determinism(tiny):
    assert len({tuple(t) for t in tiny["tokens"]}) == len(tiny["tokens"])
    again = generate()
    assert again["tokens"] == tiny["tokens"] and (again["label"] == tiny["label"]).all()
    assert generate(seed=8)["tokens"] != tiny["tokens"]


def test_vocab_as_documented():
    assert listops.VOCAB_SIZE == 18
    assert listops.VOCAB[:3] == ("<pad>", "<unk>", "<eos>") and listops.PAD_ID == 0
    assert listops.VOCAB[3:8] == ("[MIN", "[MAX", "[MED", "[SM", "]")
    assert listops.VOCAB[8:] == tuple("0123456789")
    assert listops.encode("[MAX 2 foo ]") == [4, 10, listops.UNK_ID, 7]
    # LRA's fixed form: parentheses wrap pairs and ']' is written 'X'
    assert listops.encode("( ( ( [MAX 2 ) 9 ) X )") == listops.encode("[MAX 2 9 ]")


def test_med_even_count_truncates():
    assert listops.apply_op("[MED", [1, 2, 5, 9]) == 3  # (2 + 5) // 2
    assert listops.evaluate("[MED 4 [SM 9 9 ] ]".split()) == 6  # median(4, 8) = 6


def test_to_arrays(tiny):
    arrays = listops.to_arrays(tiny, n_ctx=256)
    ids, mask = arrays["input_ids"], arrays["mask"]
    assert ids.dtype == np.int64 and ids.shape == (300, 256) and mask.dtype == bool
    assert (mask.sum(1) == tiny["length"] + 1).all()  # + <eos>
    assert (ids[~mask] == listops.PAD_ID).all()
    assert (ids[np.arange(300), tiny["length"]] == listops.EOS_ID).all()
    assert listops.decode(ids[0]) == " ".join(tiny["tokens"][0])
    assert (arrays["labels"] == tiny["label"]).all()
    with pytest.raises(ValueError):
        listops.to_arrays(tiny, n_ctx=100)


def test_paper_profile_small_batch():
    big = listops.generate_listops(n=5, seed=0)  # 500..2000 tokens, depth 10, 10 args
    for toks, label in zip(big["tokens"], big["label"]):
        assert 500 <= len(toks) <= 2000
        value, _, depth, widest = parse(toks)
        assert value == label and depth <= 10 and widest <= 10
