"""The READMEs' commands are tests, so the documentation cannot drift from behaviour.

Every command in a ```bash block of README.md, of the pages under docs/, of benchmarks/README.md and
rehearsal/README.md and of each paper README, and every ```python block, gets exactly one treatment
here, or this test fails and asks for one:

- run as written, at the smoke profile, in a throwaway copy of this checkout whose root pipeline has
  run (`dvc repro` of a root stage, `dvc metrics diff`, a stage by hand, `--help`, the report);
- `dvc exp run -S ...`: every override goes through DVC's own `-S` code (`to_path_overrides`,
  `apply_overrides`) on a copy of the params files, and every params file must then still build
  every stage's config at every profile, so a misspelt key fails here as it would for the user;
- `dvc repro` of a paper's pipeline or stage: its target must resolve (`dvc stage list`); the
  pipeline runs for real at smoke in tests/test_<paper>_pipeline.py;
- a command-line tool that runs for an hour or installs packages: its arguments go through its own
  parser, or it is skipped for the reason written in SKIPPED;
- a `python -m` command that needs a paper pipeline's outputs: skipped here, and run with the same
  arguments by the test named in COVERED;
- the quick start's `source .venv/bin/activate` (the environment must have one); its `make smoke
  PAPER=...` must name a pipeline `common.smoke` knows (tests/test_smoke.py runs a trial), and its undo,
  `rm -rf data/...`, runs in the throwaway copy, and may name only paths git ignores, holding no
  source file.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from common import smoke
from common.checkout import source_files
from tests.conftest import ROOT
from tests.test_config import PIPELINE_FOLDERS, validate_params_files
from tests.test_dvc import _run
from tests.test_stage_cli import parse_only

pytestmark = pytest.mark.pipeline  # end to end: `make test-pipeline`

READMES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md",
           ROOT / "rehearsal" / "README.md", *sorted((ROOT / "papers").glob("*/README.md"))]
PAPERS = sorted(path.parent.name for path in (ROOT / "papers").glob("*/dvc.yaml"))

SKIPPED = {
    ("make", "repro"): "every pipeline at tiny, hours; each pipeline runs at smoke in tests/test_dvc.py and "
                       "tests/test_<paper>_pipeline.py",
    ("make", "test"): "this test suite",
    ("make", "rehearse"): "an hour at the paper's shapes; its arguments are checked through `python -m rehearsal.run`",
    ("make", "install"): "installs packages (EXTRAS=dev,gpu needs CUDA)",
}
PYTHON_SKIPPED = {
    "load_released": "loads BlackMamba's released 1.5B checkpoint (6 GB); tests/test_blackmamba_model.py loads "
                     "small models in the release layout",
    "data/manticore/components": "reads the components the Manticore pipeline trains; "
                                 "tests/test_manticore_pipeline.py runs this block in its smoke repository",
}
PARSED_ONLY = {"rehearsal.run"}  # `python -m` tools that run too long to run here: parsed only
# `python -m` commands that read what a paper's pipeline makes, run with the same arguments by a named test
IN_PROCESS = "tests/test_stages_in_process.py::test_every_stage_of_every_pipeline_runs_and_writes_its_outputs"
COVERED = {module: f"{IN_PROCESS}, on the smoke pipeline's BlackMamba models"
           for module in ("common.eval.lm_eval_cli", "common.models.hf_causal_lm", "lm_eval")}


@dataclass(frozen=True)
class Example:
    where: str  # file:line
    language: str  # bash | python
    text: str


def examples(readme: Path) -> list[Example]:
    """One Example per shell command (continuation lines joined) and per python block."""
    found, block, language, start = [], None, None, 0
    lines = readme.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence and block is None:
            block, language, start = [], fence.group(1), number
        elif fence:
            where = f"{readme.relative_to(ROOT)}:{start}"
            if language == "python":
                found.append(Example(where, "python", "\n".join(text for _, text in block)))
            elif language == "bash":
                found += [Example(f"{readme.relative_to(ROOT)}:{n}", "bash", text) for n, text in shell_commands(block)]
            block = None
        elif block is not None:
            block.append((number, line))
    return found + inline_experiments(readme)


def inline_experiments(readme: Path) -> list[Example]:
    """`dvc exp run ...` written inline in the prose (a code span, possibly over several lines): its
    overrides are checked as a block's are (two such spans lacked the `++` that DVC needs)."""
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), readme.read_text(), flags=re.M | re.S)
    return [Example(f"{readme.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}", "bash",
                    " ".join(m.group(1).split()))
            for m in re.finditer(r"`(dvc exp run [^`]*)`", text)]


def shell_commands(block: list[tuple[int, str]]) -> list[tuple[int, str]]:
    commands, pending, first = [], "", 0
    for number, line in block:
        first = first or number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = " ".join(shlex.split(pending + line, comments=True))
        if text:
            commands.append((first, text))
        pending, first = "", 0
    return commands


EXAMPLES = [example for readme in READMES for example in examples(readme)]


def overrides(words: list[str]) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words) if word in ("-S", "--set-param")]


def check_overrides(values: list[str], scratch: Path) -> None:
    """Apply `-S` values as `dvc exp run` does, to copies of the params files, then build every config."""
    from dvc.utils.cli_parse import to_path_overrides
    from dvc.utils.hydra import apply_overrides

    for params_file in PIPELINE_FOLDERS:
        (scratch / params_file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / params_file, scratch / params_file)
    for path, patterns in to_path_overrides(values).items():
        assert path in PIPELINE_FOLDERS, f"-S names {path}, which is not a params file"
        apply_overrides(scratch / path, patterns)
    validate_params_files(scratch)


def experiment_targets(words: list[str]) -> list[str]:
    """The stages a `dvc exp run` names (words that are neither options nor an option's value)."""
    return [word for i, word in enumerate(words[3:], 3)
            if not word.startswith("-") and words[i - 1] not in ("-S", "--set-param")]


def expand(words: list[str]) -> list[list[str]]:
    """`<paper>` stands for each paper."""
    if not any("<paper>" in word for word in words):
        return [words]
    return [[word.replace("<paper>", paper) for word in words] for paper in PAPERS]


def is_paper_target(word: str) -> bool:
    return word.startswith("papers/")


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.where for e in EXAMPLES])
def test_readme_example(example, smoke_root_repro, tmp_path):
    repo, _ = smoke_root_repro
    if example.language == "python":
        reasons = [why for marker, why in PYTHON_SKIPPED.items() if marker in example.text]
        if reasons:
            pytest.skip(reasons[0])
        result = subprocess.run([sys.executable, "-c", example.text], cwd=repo, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        return
    for words in expand(shlex.split(example.text)):
        if tuple(words[:2]) in SKIPPED:
            pytest.skip(SKIPPED[tuple(words[:2])])
        elif words[:2] == ["source", ".venv/bin/activate"]:
            assert (Path(sys.prefix) / "bin" / "activate").is_file()  # the environment these tests run in
        elif words[:2] == ["make", "smoke"]:
            (paper,) = [w.removeprefix("PAPER=") for w in words[2:] if w.startswith("PAPER=")]
            assert paper in smoke.PIPELINES, f"{example.where}: PAPER={paper}: not a pipeline of common.smoke"
            assert "-m common.smoke $(PAPER)" in (ROOT / "Makefile").read_text()
            pytest.skip(f"the {paper} pipeline under DVC; tests/test_smoke.py runs a trial of the root pipeline")
        elif words[:2] == ["make", "exp-show"]:  # the target's command, on the copy's commit and workspace
            (paper,) = [w.removeprefix("PAPER=") for w in words[2:] if w.startswith("PAPER=")]
            assert "-m common.exp_table $(PAPER)" in (ROOT / "Makefile").read_text()
            _run([sys.executable, "-m", "common.exp_table", paper], repo)
        elif words[:2] == ["rm", "-rf"]:  # an undo: it may remove only what git ignores, and never a source file
            for path in words[2:]:
                assert path.startswith("data/") and subprocess.run(["git", "check-ignore", "-q", path],
                                                                   cwd=ROOT).returncode == 0, path
                assert not [name for name in source_files(ROOT) if name.startswith(path.rstrip("/") + "/")], path
            _run(words, repo)
        elif words[0] == "make":
            raise AssertionError(f"{example.where}: `{example.text}`: say in SKIPPED why it is not run here")
        elif words[:3] == ["dvc", "exp", "run"]:
            assert overrides(words), f"{example.where}: a `dvc exp run` example without -S: run it here instead"
            check_overrides(overrides(words), tmp_path)
            for target in experiment_targets(words):
                _run([sys.executable, "-m", "dvc", "stage", "list", target], repo)
        elif words[:2] == ["dvc", "repro"] and any(is_paper_target(w) for w in words[2:]):
            for target in filter(is_paper_target, words[2:]):
                _run([sys.executable, "-m", "dvc", "stage", "list", target], repo)
        elif words[0] == "dvc":
            _run([sys.executable, "-m", *words], repo)
        elif Path(words[0]).name == "python" and words[1] == "-m":
            module, argv = words[2], words[3:]
            if module in COVERED:
                pytest.skip(f"run by {COVERED[module]}")
            elif module in PARSED_ONLY:
                parse_only(module, argv)
            else:
                _run([sys.executable, "-m", module, *argv], repo)
        else:
            raise AssertionError(f"{example.where}: `{example.text}`: this test does not know how to run it")


def test_a_misspelt_override_fails_the_check(tmp_path):
    """The override check can fail: a key no stage reads, and a plain `key=value` for a key the profile
    block does not hold yet (DVC refuses that one itself)."""
    from common.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^lm_baseline\.tiny\.optim\.lrr: unknown key"):
        check_overrides(["++lm_baseline.tiny.optim.lrr=1e-3"], tmp_path)
    from dvc.exceptions import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="Invalid `--set-param` value"):
        check_overrides(["lm_baseline.tiny.optim.lr=1e-3"], tmp_path)
