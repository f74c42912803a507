"""Shared fixtures: a smoke-profile params file and the smoke data chain, built once per session."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Under `pytest -n N` (`make test` runs one worker per core), each worker keeps to one torch thread,
# as `common.parallel` does for its workers: two two-thread processes on two cores spin-wait.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


def pytest_collection_modifyitems(items):
    """The tests marked `long` first (a stable sort keeps the rest in order): under `pytest -n`, a
    minutes-long test scheduled last would run alone while the other workers idle."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def position_gradient(y: torch.Tensor, x: torch.Tensor, t: int) -> torch.Tensor:
    """d (y[:, t] . w) / d x for a fixed random w over y's features. A random projection sees every
    output feature; a plain sum is blind to outputs whose sum is constant (a softmax over features
    sums to 1), where its gradient is zero and only one CPU's rounding makes it nonzero. A real
    dependence then stands far above 1e-8 in float64, and rounding far below."""
    w = torch.randn(y.shape[-1], dtype=y.dtype, generator=torch.Generator().manual_seed(t))
    (grad,) = torch.autograd.grad((y[:, t] @ w).sum(), x, retain_graph=True)
    return grad


def report_pages(paper: str) -> list[str]:
    """The pages besides the README that a paper's `report` stage writes tables into (its `--pages`)."""
    import shlex

    import yaml

    cmd = shlex.split(yaml.safe_load((ROOT / "papers" / paper / "dvc.yaml").read_text())["stages"]["report"]["cmd"])
    return cmd[cmd.index("--pages") + 1:] if "--pages" in cmd else []


def report_argv(paper: str, results: Path, readme: Path) -> list[str]:
    """A paper's `report` command line over `results` and `readme`, with its committed claims.yaml; its
    other pages (`report_pages`) are copied beside `readme`, and written there."""
    import shutil

    pages = [readme.parent / Path(page).name for page in report_pages(paper)]
    for page, target in zip(report_pages(paper), pages):
        shutil.copy(ROOT / page, target)
    return ["--results", str(results), "--spec", str(ROOT / "papers" / paper / "claims.yaml"), "--readme",
            str(readme), "--claims", str(results / "claims.json"), "--metrics", str(results / "metrics.json"),
            *(["--pages", *map(str, pages)] if pages else [])]


def report_results(paper: str) -> tuple[str, ...]:
    """The results files a paper's report reads, by name, as its claims.yaml lists them."""
    import yaml

    return tuple(yaml.safe_load((ROOT / "papers" / paper / "claims.yaml").read_text())["results"])


def judge_claims(paper: str, results: dict, ids: list[str], profile: str = "tiny",
                 seeds: int | None = None) -> dict[str, dict]:
    """The ledger entries of a paper's claims `ids` (with the claims they are gated on or count,
    judged first) from `results`, which need hold only what those claims read; `seeds`: as if each
    trained claim had declared that many (hand-built results of 3 seeds test the rules, whatever
    count a claim declares for its next run)."""
    import importlib

    from common.claims.build import build_ledger, load_spec

    spec = load_spec(ROOT / "papers" / paper / "claims.yaml")
    by_id, needed = {c["id"]: c for c in spec["claims"]}, set()

    def need(name: str) -> None:
        needed.add(name)
        for other in [by_id[name].get("control"), *by_id[name].get("of", [])]:
            if other:
                need(other)

    for name in ids:
        need(name)
    chosen = [{**c, "seeds": seeds} if seeds and c.get("seeds") else c for c in spec["claims"] if c["id"] in needed]
    ledger = build_ledger({**spec, "claims": chosen}, results, importlib.import_module(f"papers.{paper}.evidence"),
                          profile)
    return {entry["id"]: entry for entry in ledger}


def rebuilt_ledger(paper: str) -> tuple[list[dict], list[dict]]:
    """A paper's ledger rebuilt from its committed claims.yaml and results, beside the committed one."""
    import importlib
    import json

    from common.claims.build import build_ledger, load_spec
    from common.eval.report import load_results

    spec = load_spec(ROOT / "papers" / paper / "claims.yaml")
    results = ROOT / "papers" / paper / "results"
    committed = json.loads((results / "claims.json").read_text())
    rebuilt = build_ledger(spec, load_results(results, tuple(spec["results"]), paper),
                           importlib.import_module(f"papers.{paper}.evidence"), committed["profile"])
    return json.loads(json.dumps(rebuilt)), committed["claims"]


def smoke_params(**overrides) -> dict:
    """The repository's params.yaml switched to the smoke profile, with `section.key` overrides
    applied to the smoke block, e.g. `smoke_params(**{"lm_baseline.trainer.max_steps": 8})`."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["profile"] = "smoke"
    for dotted, value in overrides.items():
        section, key = dotted.split(".", 1)
        params = with_overrides(params, section, {key: value})
    return params


def with_overrides(params: dict, section: str, overrides: dict) -> dict:
    """A copy of `params` with dotted `overrides` (`trainer.max_steps`) set in `section`'s smoke block."""
    params = copy.deepcopy(params)
    block = params[section].get("smoke") or {}
    params[section]["smoke"] = block
    for dotted, value in overrides.items():
        *path, last = dotted.split(".")
        node = block
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    return params


def write_params(path: Path, params: dict) -> Path:
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def run_module(module: str, *args: str, env: dict | None = None, timeout: float = 300, **kwargs):
    """Run `python -m module args...` from the repository root, capturing output."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="session")
def smoke_data(tmp_path_factory) -> dict[str, Path]:
    """Stories, tokenizer and tokenized data at the smoke profile, made by the stage functions."""
    from common.stages import generate_stories, tokenize_corpus, train_tokenizer

    root = tmp_path_factory.mktemp("smoke")
    params = write_params(root / "params.yaml", smoke_params())
    paths = {"params": params, "stories": root / "stories", "tokenizer": root / "tokenizer",
             "tokenized": root / "tokenized"}
    generate_stories.main(["--params", str(params), "--out", str(paths["stories"])])
    train_tokenizer.main(["--params", str(params), "--stories", str(paths["stories"]),
                          "--out", str(paths["tokenizer"])])
    tokenize_corpus.main(["--params", str(params), "--stories", str(paths["stories"]),
                          "--tokenizer", str(paths["tokenizer"]), "--out", str(paths["tokenized"])])
    return paths


@pytest.fixture
def one_thread():
    """For tests on tiny tensors: extra intra-op threads only add spin-waiting on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def smoke_root_repro(tmp_path_factory) -> tuple[Path, str]:
    """A throwaway copy of this checkout at the smoke profile after its first `dvc repro` of the root
    pipeline: (repository, that run's stdout)."""
    from tests.test_dvc import _run, copy_checkout

    repo = copy_checkout(tmp_path_factory.mktemp("repo"), profile="smoke")
    return repo, _run([sys.executable, "-m", "dvc", "repro"], repo).stdout
