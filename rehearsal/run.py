"""Rehearse the `paper` profile on CPU: every stage, at the paper's shapes, on local stand-ins.

    python -m rehearsal.run [--pipelines root masked_mixers ...] [--work DIR] [--out FILE]
    python -m rehearsal.run --pipelines manticore --stages programmed report --keep-outputs

What it does, in order:

1. Copies the working tree (`common.checkout.copy_source`: what a fresh clone has, and new files
   outside data/) into a throwaway directory, so the committed results and locks are never touched. With
   `--keep-outputs` the directory is kept and only the files no stage writes (and the READMEs,
   whose generated blocks a report rewrites) are copied again, so a later rehearsal of some stages
   (`--stages`) reads what earlier ones left there.
2. Rewrites every params file there with `rehearsal.profile.rehearsal_params`: `profile: paper`,
   the paper's shapes, run lengths cut to a step; with `--batch-rows N`, batches of N rows.
3. Writes the Hub stand-ins (`rehearsal.standins`), unless those written by the same code are there.
4. Runs each stage of each chosen pipeline with `dvc repro --single-item --force` (never restored
   from DVC's run cache, which would time nothing), in the order of its
   `dvc.yaml`, with `HYBRID_STANDINS` pointing at the stand-ins, no DVC cache of the outputs
   (`--no-commit`) and no weights kept for finished runs (`HYBRID_KEEP_RUN_WEIGHTS=0`): nothing
   reruns in the copy, and both filled the disk at the paper's shapes. With `--without-dvc` (a machine
   without DVC, such as a GPU machine that reaches no package index) it runs the stage's `cmd`
   itself in the stage's `wdir`, and fails the stage when a declared output is missing, as DVC
   would. The root pipeline always runs
   first, since every paper reads its data, and its failure stops the rehearsal. `--stages` runs
   only the stages named, in that order within each pipeline. It times each
   stage and samples the peak memory (proportional set size) of its whole process tree.
5. Writes a JSON record per stage (stage, date, batch rows, precision, device, seconds, peak memory, exit
   status, the log's tail on failure) into `--out`, replacing the records of the stages it ran and
   keeping the others, so that rehearsals of some pipelines add up; exits 1 if any stage failed. A
   failed stage stops its pipeline; the other pipelines go on.
6. Regenerates the readiness tables of the rehearsed pipelines' READMEs from the records
   (`rehearsal.readiness`); `--no-readiness` skips it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import date
from pathlib import Path

import psutil
import torch
import yaml

from common.checkout import copy_source, init_repository
from common.errors import ArgumentParser, exit_on_user_error
from common.io import load_json
from common.stages import file_in_the_way
from common.training.trainer import KEEP_RUN_WEIGHTS
from rehearsal import readiness, standins
from rehearsal.profile import rehearsal_params

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = {"root": "dvc.yaml", "masked_mixers": "papers/masked_mixers/dvc.yaml",
             "manticore": "papers/manticore/dvc.yaml", "blackmamba": "papers/blackmamba/dvc.yaml"}
PARAMS_FILES = ("params.yaml", "papers/masked_mixers/params.yaml", "papers/manticore/params.yaml",
                "papers/blackmamba/params.yaml")


def declared_outputs(stage: dict, wdir: Path) -> list[Path]:
    """A stage's outs, metrics and plots, as paths under its working directory `wdir`."""
    paths = []
    for key in ("outs", "metrics", "plots"):
        for out in stage.get(key, []):
            paths.append(wdir / (next(iter(out)) if isinstance(out, dict) else out))
    return paths


def stage_outputs(work: Path) -> set[Path]:
    """Every path a stage of any pipeline writes (its outs, metrics and plots), relative to `work`."""
    written = set()
    for dvc_file in PIPELINES.values():
        for stage in yaml.safe_load((work / dvc_file).read_text())["stages"].values():
            wdir = (work / dvc_file).parent / stage.get("wdir", ".")
            written |= {path.resolve().relative_to(work.resolve()) for path in declared_outputs(stage, wdir)}
    return written


def stage_command(work: Path, target: str) -> tuple[str, Path, list[Path]]:
    """What DVC would run for `target` (`stage` of the root dvc.yaml or `<dvc.yaml>:<stage>`): its shell
    command, its working directory and its declared outputs."""
    dvc_file, _, name = target.rpartition(":")
    dvc_path = work / (dvc_file or "dvc.yaml")
    stage = yaml.safe_load(dvc_path.read_text())["stages"][name]
    cmd = " && ".join(stage["cmd"]) if isinstance(stage["cmd"], list) else stage["cmd"]
    if "${" in cmd:  # DVC would interpolate it; this runner does not
        raise ValueError(f"{target}: its cmd uses DVC's ${{...}} interpolation, which --without-dvc cannot run")
    wdir = dvc_path.parent / stage.get("wdir", ".")
    return cmd, wdir, declared_outputs(stage, wdir)


def kept_outputs(work: Path) -> set[Path]:
    """What `--keep-outputs` keeps: every stage output but the pages (READMEs and docs). A report stage
    rewrites only the generated blocks of its pages, so the pages it reads must be this checkout's: an
    old one lacks the blocks of stages added since."""
    return {path for path in stage_outputs(work) if path.suffix != ".md"}


# What marks a directory as this runner's, so that it may delete and rewrite it: the work copy's
# marker (or, from rehearsals before it, their logs) and the stand-ins' version file.
WORK_MARKERS, STANDINS_MARKERS = (".rehearsal_work", "rehearsal_logs"), ("written_by",)


def not_ours(path: Path, markers: tuple[str, ...]) -> str | None:
    """Why the runner must not delete `path`, or None: it is absent, empty, or holds one of `markers`.
    A mistyped `--work .` would otherwise delete the checkout."""
    if ROOT.resolve().is_relative_to(path.resolve()):
        return "it holds this checkout"
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return None
    if any((path / marker).exists() for marker in markers):
        return None
    return f"a directory this runner did not write (no {' or '.join(markers)}), and it would be deleted"


def prepare(work: Path, batch_rows: int | None, precision: str | None, keep_outputs: bool = False) -> None:
    if work.exists() and not keep_outputs:
        shutil.rmtree(work)
    fresh = not work.exists()
    work.mkdir(parents=True, exist_ok=True)
    (work / WORK_MARKERS[0]).touch()
    copy_source(ROOT, work, skip=set() if fresh else kept_outputs(ROOT))
    if fresh:
        init_repository(work)
    for name in PARAMS_FILES:
        path = work / name
        params = rehearsal_params(yaml.safe_load((ROOT / name).read_text()), batch_rows, precision)
        path.write_text(yaml.safe_dump(params, sort_keys=False))
    for lock in work.glob("**/dvc.lock"):
        lock.unlink()  # every stage runs, whatever the committed locks say


def stage_names(dvc_file: Path) -> list[str]:
    return list(yaml.safe_load(dvc_file.read_text())["stages"])


def _peak_memory(proc: psutil.Process, stop: threading.Event, peak: list[int]) -> None:
    # Proportional set size: data-loader and worker processes share pages they forked with, which
    # a sum of resident sizes would count once per process.
    while not stop.is_set():
        total = 0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                total += p.memory_full_info().pss
            except psutil.Error:  # gone between the listing and the reading
                pass
        peak[0] = max(peak[0], total)
        stop.wait(0.5)


def run_stage(work: Path, target: str, env: dict[str, str], logs: Path, without_dvc: bool = False) -> dict:
    logfile = logs / (target.replace("/", "_").replace(":", "__") + ".log")
    if without_dvc:
        cmd, cwd, outputs = stage_command(work, target)
        argv = ["/bin/sh", "-c", cmd]
    else:
        # --force: without it DVC skips a stage whose run its cache has seen, and the record would time nothing.
        # --no-commit: the throwaway copy needs no cache of its outputs (22 GB of copies of Manticore's runs).
        argv = [sys.executable, "-m", "dvc", "repro", "--single-item", "--force", "--no-commit", target]
        cwd, outputs = work, []
    start = time.perf_counter()
    with logfile.open("w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        stop, peak = threading.Event(), [0]
        sampler = threading.Thread(target=_peak_memory, args=(psutil.Process(proc.pid), stop, peak), daemon=True)
        sampler.start()
        rc = proc.wait()
        stop.set()
        sampler.join()
        missing = [str(p.resolve().relative_to(work.resolve())) for p in outputs if rc == 0 and not p.exists()]
        if missing:  # DVC fails such a stage too
            out.write(f"declared outputs not written: {', '.join(missing)}\n")
            rc = 1
    record = {"stage": target, "seconds": round(time.perf_counter() - start, 1),
              "peak_pss_mib": round(peak[0] / 2 ** 20), "rc": rc}
    if rc != 0:
        record["log_tail"] = logfile.read_text().splitlines()[-15:]
    return record


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipelines", nargs="+", choices=list(PIPELINES), default=list(PIPELINES))
    parser.add_argument("--work", type=Path, default=ROOT / "data/rehearsal/work",
                        help="the throwaway copy (deleted and rewritten: new, empty, or one this runner wrote)")
    parser.add_argument("--standins", type=Path, default=ROOT / "data/rehearsal/standins")
    parser.add_argument("--batch-rows", type=int, default=None,
                        help="cut every batch size to this many rows (default: the paper's batches)")
    parser.add_argument("--precision", choices=["32-true", "bf16-mixed"], default=None,
                        help="every trainer's precision (default: the paper's, bf16-mixed almost everywhere)")
    parser.add_argument("--out", type=Path, default=readiness.RECORDS,
                        help="the records; those of stages not rehearsed now are kept")
    parser.add_argument("--stages", nargs="+", metavar="STAGE",
                        help="only these stages of the chosen pipelines (default: all)")
    parser.add_argument("--keep-outputs", action="store_true",
                        help="keep what earlier rehearsals wrote in the work copy, for --stages that read it")
    parser.add_argument("--no-readiness", action="store_true", help="leave the READMEs' readiness tables alone")
    parser.add_argument("--without-dvc", action="store_true",
                        help="run each stage's cmd directly and check its declared outputs (no DVC needed)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    if args.batch_rows is not None and args.batch_rows < 1:
        parser.error(f"--batch-rows must be at least 1, got {args.batch_rows}")
    if args.stages:
        known = {stage for pipeline in args.pipelines for stage in stage_names(ROOT / PIPELINES[pipeline])}
        unknown = [s for s in args.stages if s not in known | set(stage_names(ROOT / PIPELINES["root"]))]
        if unknown:
            parser.error(f"--stages: {unknown[0]} is not a stage of {', '.join(args.pipelines)}; "
                         f"they have: {', '.join(sorted(known))}")
    if args.without_dvc:  # before anything is written: a stage this runner cannot run stops it here
        for pipeline in {"root", *args.pipelines}:
            for stage in stage_names(ROOT / PIPELINES[pipeline]):
                try:
                    stage_command(ROOT, stage if pipeline == "root" else f"{PIPELINES[pipeline]}:{stage}")
                except ValueError as err:
                    parser.error(f"--without-dvc: {err}")
    for flag, path in (("--work", args.work), ("--standins", args.standins), ("--out", args.out)):
        if (blocker := file_in_the_way(path)) is not None:
            parser.error(f"{flag} {path}: {blocker} is a file, not a directory")
    for flag, path, markers in (("--work", args.work, WORK_MARKERS), ("--standins", args.standins, STANDINS_MARKERS)):
        if (why := not_ours(path, markers)) is not None:
            parser.error(f"{flag} {path}: {why}; name a new or empty directory")
    # The records this run keeps, read before minutes of stand-ins are written.
    kept = load_json(args.out, "give a records file `make rehearse` wrote") if args.out.is_file() else []
    if not isinstance(kept, list):
        parser.error(f"--out {args.out}: not a records file (a JSON list)")

    # Rewritten whenever the code that writes them changed; the marker is written last.
    marker, version = args.standins / "written_by", hashlib.sha256(Path(standins.__file__).read_bytes()).hexdigest()
    if not marker.is_file() or marker.read_text() != version:
        log.info("writing stand-ins to %s", args.standins)
        shutil.rmtree(args.standins, ignore_errors=True)
        args.standins.mkdir(parents=True)
        marker.write_text("incomplete")  # ours from the start: an interrupted write may be redone
        standins.write_standins(args.standins)
        marker.write_text(version)
    prepare(args.work, args.batch_rows, args.precision, args.keep_outputs)
    logs = args.work / "rehearsal_logs"
    logs.mkdir(exist_ok=True)
    # The Arrow copies `datasets` makes of the stand-ins go inside the throwaway copy: in the user's
    # ~/.cache they outlived the copy and were never reused (5.9 GB had gathered there by 2026-11-27).
    env = {**os.environ, "HYBRID_STANDINS": str(args.standins.resolve()), "PYTHONHASHSEED": "0",
           "HF_DATASETS_CACHE": str((args.work / "hf_datasets_cache").resolve()), KEEP_RUN_WEIGHTS: "0",
           "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    # The stages pick CUDA whenever it is there (`accelerator: auto`): a record says which it was.
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    records = []

    def save() -> None:
        ran = {r["stage"] for r in records}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps([r for r in kept if r["stage"] not in ran] + records, indent=1) + "\n")

    pipelines = ["root", *[p for p in args.pipelines if p != "root"]]
    for pipeline in pipelines:
        dvc_file = PIPELINES[pipeline]
        for stage in stage_names(args.work / dvc_file):
            if args.stages and stage not in args.stages:
                continue
            target = stage if pipeline == "root" else f"{dvc_file}:{stage}"
            record = run_stage(args.work, target, env, logs, args.without_dvc)
            records.append({"pipeline": pipeline, "date": date.today().isoformat(), "batch_rows": args.batch_rows,
                            "precision": args.precision, "device": device, **record})
            log.info("%s: %s s, peak %s MiB%s", target, record["seconds"], record["peak_pss_mib"],
                     "" if record["rc"] == 0 else f", FAILED (rc {record['rc']})")
            save()
            if record["rc"] != 0:
                break
        if pipeline == "root" and records and records[-1]["rc"] != 0:
            break  # every paper reads the root pipeline's data
    if not args.no_readiness:
        readiness.main(["--pipelines", *pipelines, "--records", str(args.out)])
    failed = [r["stage"] for r in records if r["rc"] != 0]
    log.info("rehearsal: %d stages, %d failed%s", len(records), len(failed), f": {', '.join(failed)}" if failed else "")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
