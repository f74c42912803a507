"""How much of the held-out instruction text the instruction components saw in pretraining.

Short templated instructions repeat ("Give the opposite of the word loud."), so two draws of the
generator can give one document. This measures, from the generators and the active profile's
settings (no stage output is read), the documents held out in `instruction_text`'s validation split
and in `specialists`' instruction validation set that also occur in `instruction_text`'s training
split, by count and by share of their tokens in the story tokenizer:

    python -m sizing.manticore_heldout_overlap --params papers/manticore/params.yaml --tokenizer data/tokenizer
"""

from __future__ import annotations

from pathlib import Path

from common.errors import ArgumentParser, exit_on_user_error
from common.stages import load_stage


def overlap(held_out: list[str], seen: set[str], tokenizer) -> dict:
    """Held-out documents found in `seen`: their count and their share of the held-out tokens."""
    lengths = [len(tokenizer.encode(doc, add_special_tokens=False)) for doc in held_out]
    leaked = [n for doc, n in zip(held_out, lengths) if doc in seen]
    return {"documents": len(held_out), "seen": len(leaked), "token_share": sum(leaked) / max(1, sum(lengths))}


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=Path, required=True, metavar="PATH")
    parser.add_argument("--tokenizer", type=Path, required=True, metavar="PATH")
    args = parser.parse_args(argv)
    from common.data.tokenizer import load_tokenizer
    from papers.manticore.instruction_text import InstructionTextConfig
    from papers.manticore.instructions import distinct_instructions, generate_instructions
    from papers.manticore.specialists import FINE_TUNING_IDS, SpecialistsConfig

    text_cfg, profile, _ = load_stage(args.params, "instruction_text", InstructionTextConfig)
    spec_cfg, _, _ = load_stage(args.params, "specialists", SpecialistsConfig)
    tokenizer = load_tokenizer(args.tokenizer)
    texts = generate_instructions(text_cfg.n_train + text_cfg.n_validation, text_cfg.seed, text_cfg.start)["text"]
    pretrained = set(texts[:text_cfg.n_train])
    # The specialists' held-out instructions, as `specialists.genre_documents` draws them.
    held_out = distinct_instructions(spec_cfg.n_validation, FINE_TUNING_IDS)
    print(f"profile {profile}")
    for name, docs in (("instruction_text validation", texts[text_cfg.n_train:]),
                       ("specialists' held-out instructions", held_out)):
        found = overlap(docs, pretrained, tokenizer)
        print(f"{name}: {found['seen']} of {found['documents']} documents also in instruction_text's training "
              f"split, {found['token_share']:.1%} of their tokens")


if __name__ == "__main__":
    main()
