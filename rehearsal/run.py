"""Rehearse the `paper` profile on CPU: every stage, at the paper's shapes, on local stand-ins.

    python -m rehearsal.run [--pipelines root masked_mixers ...] [--work DIR] [--out FILE]

What it does, in order:

1. Copies the working tree (tracked files and untracked ones git does not ignore) into a
   throwaway directory, so the committed results and locks are never touched.
2. Rewrites every params file there with `rehearsal.profile.rehearsal_params`: `profile: paper`,
   the paper's shapes, run lengths cut to a step; with `--batch-rows N`, batches of N rows.
3. Writes the Hub stand-ins (`rehearsal.standins`), unless those written by the same code are there.
4. Runs each stage of each chosen pipeline with `dvc repro --single-item`, in the order of its
   `dvc.yaml`, with `HYBRID_STANDINS` pointing at the stand-ins; the root pipeline always runs
   first, since every paper reads its data, and its failure stops the rehearsal. It times each
   stage and samples the peak memory (proportional set size) of its whole process tree.
5. Writes a JSON record (stage, seconds, peak memory, exit status, the log's tail on failure) and
   exits 1 if any stage failed. A failed stage stops its pipeline; the other pipelines go on.
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
from pathlib import Path

import psutil
import yaml

from rehearsal import standins
from rehearsal.profile import rehearsal_params

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = {"root": "dvc.yaml", "masked_mixers": "papers/masked_mixers/dvc.yaml",
             "manticore": "papers/manticore/dvc.yaml", "blackmamba": "papers/blackmamba/dvc.yaml"}
PARAMS_FILES = ("params.yaml", "papers/masked_mixers/params.yaml", "papers/manticore/params.yaml",
                "papers/blackmamba/params.yaml")


def copy_tree(src: Path, dst: Path) -> None:
    """The files git would hand a fresh clone, plus untracked files it does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=src, check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (src / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / name, dst / name)


def prepare(work: Path, batch_rows: int | None, precision: str | None) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    copy_tree(ROOT, work)
    # Its own repository: inside this one, under an ignored path, DVC would refuse every dvc.yaml.
    subprocess.run(["git", "init", "--quiet"], cwd=work, check=True)
    for name in PARAMS_FILES:
        path = work / name
        params = rehearsal_params(yaml.safe_load(path.read_text()), batch_rows, precision)
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


def run_stage(work: Path, target: str, env: dict[str, str], logs: Path) -> dict:
    logfile = logs / (target.replace("/", "_").replace(":", "__") + ".log")
    start = time.perf_counter()
    with logfile.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dvc", "repro", "--single-item", target],
                                cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
        stop, peak = threading.Event(), [0]
        sampler = threading.Thread(target=_peak_memory, args=(psutil.Process(proc.pid), stop, peak), daemon=True)
        sampler.start()
        rc = proc.wait()
        stop.set()
        sampler.join()
    record = {"stage": target, "seconds": round(time.perf_counter() - start, 1),
              "peak_pss_mib": round(peak[0] / 2 ** 20), "rc": rc}
    if rc != 0:
        record["log_tail"] = logfile.read_text().splitlines()[-15:]
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipelines", nargs="+", choices=list(PIPELINES), default=list(PIPELINES))
    parser.add_argument("--work", type=Path, default=ROOT / "data/rehearsal/work",
                        help="the throwaway copy (deleted and rewritten)")
    parser.add_argument("--standins", type=Path, default=ROOT / "data/rehearsal/standins")
    parser.add_argument("--batch-rows", type=int, default=None,
                        help="cut every batch size to this many rows (default: the paper's batches)")
    parser.add_argument("--precision", choices=["32-true", "bf16-mixed"], default=None,
                        help="every trainer's precision (default: the paper's, bf16-mixed almost everywhere)")
    parser.add_argument("--out", type=Path, default=ROOT / "data/rehearsal/rehearsal.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    # Rewritten whenever the code that writes them changed; the marker is written last.
    marker, version = args.standins / "written_by", hashlib.sha256(Path(standins.__file__).read_bytes()).hexdigest()
    if not marker.is_file() or marker.read_text() != version:
        log.info("writing stand-ins to %s", args.standins)
        shutil.rmtree(args.standins, ignore_errors=True)
        standins.write_standins(args.standins)
        marker.write_text(version)
    if args.batch_rows is not None and args.batch_rows < 1:
        parser.error(f"--batch-rows must be at least 1, got {args.batch_rows}")
    prepare(args.work, args.batch_rows, args.precision)
    logs = args.work / "rehearsal_logs"
    logs.mkdir()
    env = {**os.environ, "HYBRID_STANDINS": str(args.standins.resolve()), "PYTHONHASHSEED": "0",
           "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    records = []
    pipelines = ["root", *[p for p in args.pipelines if p != "root"]]
    for pipeline in pipelines:
        dvc_file = PIPELINES[pipeline]
        for stage in stage_names(args.work / dvc_file):
            target = stage if pipeline == "root" else f"{dvc_file}:{stage}"
            record = run_stage(args.work, target, env, logs)
            records.append({"pipeline": pipeline, "batch_rows": args.batch_rows, "precision": args.precision,
                            **record})
            log.info("%s: %s s, peak %s MiB%s", target, record["seconds"], record["peak_pss_mib"],
                     "" if record["rc"] == 0 else f", FAILED (rc {record['rc']})")
            if record["rc"] != 0:
                break
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(records, indent=1) + "\n")
        if pipeline == "root" and records[-1]["rc"] != 0:
            break  # every paper reads the root pipeline's data
    failed = [r["stage"] for r in records if r["rc"] != 0]
    log.info("rehearsal: %d stages, %d failed%s", len(records), len(failed), f": {', '.join(failed)}" if failed else "")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
