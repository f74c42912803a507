"""Write offline stand-ins for everything the `paper` profile fetches from the Hugging Face Hub.

    python -m rehearsal.standins --out DIR [--only NAME ...]

The layout is the one `common.standins` reads while `HYBRID_STANDINS=DIR` is set:

- `datasets/<source>/<split>.parquet`: each Hub data set of `common.data.hub` in its Hub schema
  (the same columns, splits and types), a few hundred rows made by the project's own generators.
  TinyStories' rows end with made-up words, so that the root tokenizer can learn its full
  vocabulary from them. FineWeb's validation is the first 50,000 rows of its train split, so those stand-ins hold
  50,000 rows more.
- `datasets/<path>/<config>/<split>.parquet`: the data sets of BlackMamba's lm-eval tasks at `paper`
  (HellaSwag, PIQA, WinoGrande, LAMBADA, ARC-Easy/Challenge, OpenBookQA), under the Hub path and
  config the harness's task files name, in their schema, HARNESS_ROWS generated rows per split.
- `models/<Hub id>/`: each checkpoint the `paper` profile loads, built from the real
  architecture's config (every width, depth, vocabulary and position count) with random weights,
  saved in the release's dtype with a tokenizer of the real length and special-token ids. Two are
  shallower than the real ones, at the real widths: Pythia-410M (12 of 24 layers) and Mamba-370M
  (24 of 48), whose paper hybrid cannot train in this machine's 24 GiB (`Checkpoint.standin_layers`). The
  tokenizers are byte-level BPE trained here on generated text, filled up to the real length with
  tokens no merge reaches: only the merges differ from the real ones.
  Meta-Llama-3-8B-Instruct is stood in for by a *small* Llama (2 layers of width 256) with the real
  128,256-token vocabulary and a Llama-3-style chat template: random 8B weights would take 16 GB
  and seconds per generated token on 2 cores, and the summaries stage only needs the interface.

Nothing here is a real text, weight or merge; everything is deterministic in `--seed`.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from common.config import SEED_RANGE
from common.data.hub import FINEWEB_VALIDATION_ROWS, HUB_CLASSIFICATION_SOURCES, HUB_SOURCES
from common.data.stories import generate_stories
from common.errors import ArgumentParser, exit_on_user_error
from common.io import atomic_dir
from common.stages import file_in_the_way
from papers.manticore.instructions import generate_instructions

log = logging.getLogger(__name__)

N_ROWS = 600  # per split; every `paper` data count is cut below this by rehearsal.profile
# Per split of each harness task: the `paper` zero-shot evaluation reads every document (no limit),
# and a few exercise each task's prompt, choices and metric.
HARNESS_ROWS = 8


# ---- data sets, in each Hub schema ----

def _stories(n: int, seed: int, start: int = 0) -> list[str]:
    return generate_stories(n, seed, start)["text"]


def _with_made_up_words(texts: list[str], seed: int) -> list[str]:
    # The root tokenizer learns TinyStories' 4096 tokens from the real text; the generated stories
    # hold about 3,450, too few, so each stand-in ends with 60 words of a made-up lexicon.
    rng = random.Random(seed)
    lexicon = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(4000)]
    return [f"{text} Words: {' '.join(rng.choices(lexicon, k=60))}." for text in texts]


def _ptb_sentences(texts: list[str], seed: int) -> list[str]:
    # Mikolov's preprocessing: lower case, no punctuation, digits as N, rare words as <unk>.
    rng = random.Random(seed)
    sentences = []
    for text in texts:
        for sentence in text.replace("!", ".").replace("?", ".").split("."):
            words = ["N" if w.isdigit() else w for w in sentence.lower().replace(",", " ").replace('"', " ").split()]
            words = ["<unk>" if rng.random() < 0.03 else w for w in words]
            if words:
                sentences.append(" " + " ".join(words) + " ")
    return sentences


def _cifar_rows(n: int, seed: int) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    images = [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), "RGB") for _ in range(n)]
    return {"img": images, "label": rng.integers(0, 10, n).tolist()}


def _squad_rows(contexts: list[str], start: int) -> dict[str, list]:
    # MLQA's and XQuAD's schema: the answer is a span of the context, here its first sentence.
    answers = [{"answer_start": [0], "text": [c.split(".")[0]]} for c in contexts]
    return {"id": [f"standin-{start + i}" for i in range(len(contexts))], "title": ["Stand-in"] * len(contexts),
            "context": contexts, "question": ["How does the passage begin?"] * len(contexts), "answers": answers}


def dataset_splits(seed: int) -> dict[str, dict[str, datasets.Dataset]]:
    """Every Hub data set the `paper` profile reads, by `common.data.hub` source name and Hub split."""
    n = N_ROWS
    string = datasets.Value("string")
    text_only = datasets.Features({"text": string})
    squad = datasets.Features({"id": string, "title": string, "context": string, "question": string,
                               "answers": datasets.Sequence({"answer_start": datasets.Value("int32"), "text": string})})
    web = datasets.Features({"text": string, "id": string, "url": string, "language": string,
                             "token_count": datasets.Value("int64")})

    def web_rows(start: int, count: int) -> datasets.Dataset:
        texts = _stories(count, seed + 1, start)
        return datasets.Dataset.from_dict(
            {"text": texts, "id": [f"<urn:standin:{start + i}>" for i in range(count)],
             "url": [f"https://standin.invalid/{start + i}" for i in range(count)],
             "language": ["en"] * count, "token_count": [len(t.split()) for t in texts]}, features=web)

    instructions = generate_instructions(2 * n, seed)
    stories = _stories(4 * n, seed)
    labels = random.Random(seed)
    return {
        "tinystories": {split: datasets.Dataset.from_dict(
            {"text": _with_made_up_words(stories[i * n:(i + 1) * n], seed + i)}, features=text_only)
            for i, split in enumerate(("train", "validation"))},
        "fineweb": {"train": web_rows(0, FINEWEB_VALIDATION_ROWS + n)},
        "fineweb_edu": {"train": web_rows(10 ** 6, FINEWEB_VALIDATION_ROWS + n)},
        "ptb": {split: datasets.Dataset.from_dict({"sentence": _ptb_sentences(stories[i * n:(i + 1) * n], seed)})
                for i, split in enumerate(("train", "validation", "test"))},
        "alpaca": {"train": datasets.Dataset.from_dict(
            {"instruction": instructions["instruction"][:n], "input": instructions["input"][:n],
             "output": instructions["output"][:n], "text": instructions["text"][:n]})},
        "eli5": {"train": datasets.Dataset.from_dict(
            {"question": [f"Why did this happen? {s.split('.')[0]}." for s in stories[2 * n:3 * n]],
             "answer": stories[3 * n:4 * n]})},
        **{name: {split: datasets.Dataset.from_dict(_squad_rows(stories[i * n:(i + 1) * n], i * n), features=squad)
                  for i, split in enumerate(splits)}
           for name, splits in (("mlqa_es", ("test", "validation")), ("mlqa_zh", ("test", "validation")),
                                ("mlqa_vi", ("test", "validation")), ("xquad_ar", ("validation",)))},
        # Every third row has a system prompt, which the loader drops.
        "openorca_ja": {"train": datasets.Dataset.from_dict(
            {"id/en": [f"standin.{i}" for i in range(n)],
             "system_prompt/en": ["You are a helpful assistant." if i % 3 == 0 else "" for i in range(n)],
             "question/en": [f"How does this begin? {s}" for s in stories[:n]],
             "response/en": [s.split(".")[0] for s in stories[:n]],
             "question/ja": [f"How does this begin? {s}" for s in stories[n:2 * n]],
             "response/ja": [s.split(".")[0] for s in stories[n:2 * n]]})},
        "imdb": {split: datasets.Dataset.from_dict(
            {"text": stories[i * n:(i + 1) * n], "label": [labels.randint(0, 1) for _ in range(n)]},
            features=datasets.Features({"text": string, "label": datasets.ClassLabel(names=["neg", "pos"])}))
            for i, split in enumerate(("train", "test"))},
        "cifar10": {split: datasets.Dataset.from_dict(
            _cifar_rows(n, seed + i),
            features=datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)}))
            for i, split in enumerate(("train", "test"))},
    }


def harness_splits(seed: int) -> dict[str, dict[str, datasets.Dataset]]:
    """The lm-eval tasks' data sets, by `<Hub path>/<config>` as the harness's task files name them."""
    rng = random.Random(seed)
    n = HARNESS_ROWS
    lines = [line.strip() + "." for story in _stories(40 * n, seed + 7) for line in story.split(".") if len(line) > 30]

    def pick(k: int) -> list[str]:
        return rng.sample(lines, k)

    def lettered() -> dict:
        return {"text": pick(4), "label": list("ABCD")}

    def rows(make) -> dict[str, datasets.Dataset]:
        splits = ("train", "validation", "test")
        return {split: datasets.Dataset.from_list([make(i) for i in range(n)]) for split in splits}

    def hellaswag(i: int) -> dict:
        context = pick(1)[0]
        return {"ind": i, "activity_label": "Stories", "ctx_a": context, "ctx_b": "then", "ctx": f"{context} then",
                "endings": pick(4), "source_id": f"standin~{i}", "split": "val", "split_type": "indomain",
                "label": str(rng.randrange(4))}

    def winogrande(i: int) -> dict:
        words = pick(1)[0].split()
        k = rng.randrange(1, len(words) - 1)
        return {"sentence": " ".join([*words[:k], "_", *words[k + 1:]]), "option1": words[k],
                "option2": rng.choice(words), "answer": rng.choice(["1", "2"])}

    def arc(i: int) -> dict:
        return {"id": f"standin-{i}", "question": pick(1)[0], "choices": lettered(),
                "answerKey": rng.choice("ABCD")}

    return {
        "Rowan/hellaswag/default": rows(hellaswag),
        "baber/piqa/default": rows(lambda i: {"goal": pick(1)[0], "sol1": pick(1)[0], "sol2": pick(1)[0],
                                              "label": rng.randrange(2)}),
        "allenai/winogrande/winogrande_xl": rows(winogrande),
        "EleutherAI/lambada_openai/default": rows(lambda i: {"text": " ".join(pick(3))}),
        "allenai/ai2_arc/ARC-Easy": rows(arc),
        "allenai/ai2_arc/ARC-Challenge": rows(arc),
        "allenai/openbookqa/main": rows(lambda i: {"id": f"standin-{i}", "question_stem": pick(1)[0],
                                                   "choices": lettered(), "answerKey": rng.choice("ABCD")}),
    }


# ---- tokenizers of the real length and special ids ----

def standin_tokenizer(length: int, specials: dict[int, str], seed: int, *, bos: str, eos: str,
                      pad: str | None = None, add_bos: bool = False,
                      chat_template: str | None = None) -> PreTrainedTokenizerFast:
    """Byte-level BPE with `length` tokens and special token `specials[i]` at id i. Merges are
    learned from generated text; ids no merge reaches are filled with plain tokens `<filler_k>`.
    `add_bos`: encoding puts `bos` first, as Llama 3's tokenizer does (GPT-2's and GPT-NeoX's do not)."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8192, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    core.train_from_iterator(_stories(4000, seed) + generate_instructions(2000, seed)["text"], trainer=trainer)
    spec = json.loads(core.to_str())
    learned = sorted(spec["model"]["vocab"], key=spec["model"]["vocab"].get)
    free = (i for i in range(length) if i not in specials)
    vocab = {token: next(free) for token in learned}
    for k, i in enumerate(free):
        vocab[f"<filler_{k}>"] = i
    vocab.update({token: i for i, token in specials.items()})
    if len(vocab) != length or sorted(vocab.values()) != list(range(length)):
        raise AssertionError(f"stand-in vocabulary is not 0..{length - 1}")
    spec["model"]["vocab"] = vocab
    spec["added_tokens"] = [{"id": i, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for i, token in sorted(specials.items())]
    core = Tokenizer.from_str(json.dumps(spec))
    if add_bos:
        core.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core,
                                        bos_token=bos, eos_token=eos, unk_token=eos, pad_token=pad)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return tokenizer


GPT2_SPECIALS = {50256: "<|endoftext|>"}
NEOX_SPECIALS = {0: "<|endoftext|>", 1: "<|padding|>"}
LLAMA3_SPECIALS = {128000 + k: f"<|reserved_special_token_{k}|>" for k in range(256)} | {
    128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128006: "<|start_header_id|>",
    128007: "<|end_header_id|>", 128009: "<|eot_id|>"}
# The Llama 3 chat format (header tokens around each role, <|eot_id|> after each turn), written here.
LLAMA3_CHAT = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")


# ---- checkpoints: real configs, random weights ----

@dataclass(frozen=True)
class Checkpoint:
    hub_id: str
    build: Callable[..., torch.nn.Module]  # the model from its real config, randomly initialised
    dtype: torch.dtype                    # the release's dtype
    tokenizer: Callable[[int], PreTrainedTokenizerFast]  # seed -> tokenizer
    # The stand-in's depth where the real one cannot train here (None: the real depth). Pythia-410M and
    # Mamba-370M: their paper hybrid (finetune_tasks) was killed for memory at 23.4 GiB in its first
    # search run (2026-11-26; weights, gradients, Adam states, the projector-pretrained start and the
    # components it is built from, in fp32); at half depth it fits. Every width stays the real one.
    # `build(layers)` builds that depth.
    standin_layers: int | None = None

    def build_standin(self) -> torch.nn.Module:
        return self.build() if self.standin_layers is None else self.build(self.standin_layers)


def _gpt_neo_125m() -> torch.nn.Module:
    from transformers import GPTNeoConfig, GPTNeoForCausalLM
    return GPTNeoForCausalLM(GPTNeoConfig(
        vocab_size=50257, max_position_embeddings=2048, hidden_size=768, num_layers=12, num_heads=12,
        attention_types=[[["global", "local"], 6]], window_size=256, bos_token_id=50256, eos_token_id=50256))


def _mamba(hidden: int, real_layers: int) -> Callable[..., torch.nn.Module]:
    def build(layers: int | None = None) -> torch.nn.Module:
        from transformers import MambaConfig, MambaForCausalLM
        return MambaForCausalLM(MambaConfig(vocab_size=50280, hidden_size=hidden,
                                            num_hidden_layers=layers or real_layers, state_size=16, expand=2,
                                            conv_kernel=4, bos_token_id=0, eos_token_id=0, pad_token_id=0,
                                            tie_word_embeddings=True))
    return build


def _pythia_410m(layers: int | None = None) -> torch.nn.Module:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    return GPTNeoXForCausalLM(GPTNeoXConfig(
        vocab_size=50304, hidden_size=1024, num_hidden_layers=layers or 24, num_attention_heads=16,
        intermediate_size=4096, rotary_pct=0.25, max_position_embeddings=2048, use_parallel_residual=True,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=0))


def _llama3_instruct_small() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=128256, hidden_size=256, intermediate_size=688, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=8192, rope_theta=500000.0, bos_token_id=128000,
        eos_token_id=[128001, 128009], tie_word_embeddings=False))


def _gpt2_tokenizer(seed: int) -> PreTrainedTokenizerFast:
    return standin_tokenizer(50257, GPT2_SPECIALS, seed, bos="<|endoftext|>", eos="<|endoftext|>")


def _neox_tokenizer(seed: int) -> PreTrainedTokenizerFast:
    return standin_tokenizer(50277, NEOX_SPECIALS, seed, bos="<|endoftext|>", eos="<|endoftext|>",
                             pad="<|padding|>")


def _llama3_tokenizer(seed: int) -> PreTrainedTokenizerFast:
    return standin_tokenizer(128256, LLAMA3_SPECIALS, seed, bos="<|begin_of_text|>", eos="<|eot_id|>",
                             add_bos=True, chat_template=LLAMA3_CHAT)


CHECKPOINTS = {c.hub_id: c for c in (
    Checkpoint("EleutherAI/gpt-neo-125m", _gpt_neo_125m, torch.float32, _gpt2_tokenizer),
    Checkpoint("state-spaces/mamba-130m-hf", _mamba(768, 24), torch.float32, _neox_tokenizer),
    Checkpoint("EleutherAI/pythia-410m", _pythia_410m, torch.float16, _neox_tokenizer, standin_layers=12),
    Checkpoint("state-spaces/mamba-370m-hf", _mamba(1024, 48), torch.float32, _neox_tokenizer, standin_layers=24),
    Checkpoint("meta-llama/Meta-Llama-3-8B-Instruct", _llama3_instruct_small, torch.bfloat16, _llama3_tokenizer),
)}


def write_standins(out: Path, seed: int = 0, only: set[str] | None = None) -> None:
    """Write the stand-ins named in `only` (data set source names and Hub ids; all if None)."""
    datasets.disable_progress_bars()
    for source, splits in {**dataset_splits(seed), **harness_splits(seed)}.items():
        if only is None or source in only:
            with atomic_dir(out / "datasets" / source) as tmp:
                for split, rows in splits.items():
                    rows.to_parquet(str(tmp / f"{split}.parquet"))
            log.info("data set %s: %s", source, {s: len(r) for s, r in splits.items()})
    for hub_id, checkpoint in CHECKPOINTS.items():
        if only is None or hub_id in only:
            torch.manual_seed(seed)
            model = checkpoint.build_standin().to(checkpoint.dtype)
            with atomic_dir(out / "models" / hub_id) as tmp:
                model.save_pretrained(str(tmp))
                checkpoint.tokenizer(seed).save_pretrained(str(tmp))
            log.info("checkpoint %s: %.0fM parameters, %s", hub_id,
                     sum(p.numel() for p in model.parameters()) / 1e6, checkpoint.dtype)


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", help="data set source names and Hub ids to write (default: all)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not SEED_RANGE["ge"] <= args.seed <= SEED_RANGE["le"]:
        parser.error(f"--seed {args.seed}: allowed {SEED_RANGE['ge']} to {SEED_RANGE['le']}")
    if (blocker := file_in_the_way(args.out / "x")) is not None:
        parser.error(f"--out {args.out}: {blocker} is a file, not a directory")
    known = [*HUB_SOURCES, *HUB_CLASSIFICATION_SOURCES, *harness_splits(args.seed), *CHECKPOINTS]
    unknown = sorted(set(args.only or ()) - set(known))
    if unknown:
        parser.error(f"--only {unknown[0]}: no such stand-in; allowed: {', '.join(known)}")
    write_standins(args.out, args.seed, set(args.only) if args.only else None)


if __name__ == "__main__":
    main()
