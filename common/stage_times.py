"""How long each stage of a pipeline takes, measured as `dvc repro` runs it, and the tables of the
docs pages generated from those measurements (never typed).

    python -m common.stage_times run blackmamba    # `dvc repro papers/blackmamba/dvc.yaml`, timed
    python -m common.stage_times render             # the tables of the docs pages, from the records

`run` runs `dvc repro` of the pipeline (the root data stages it reads included) and passes its
output through. Each stage is timed from DVC's "Running stage" line to the next stage's (or to the
end), so a stage's time includes its start-up and DVC's hashing of what it wrote: what a user
waits for. A stage whose outputs are up to date is kept by DVC, as in a fresh clone for a stage
whose outputs are committed results (the pages list it as kept); `--force` runs every stage
(`dvc repro -f`), for results all made on one machine. The record, `timings/<pipeline>.json`,
is kept in git as results are, and names the commit, date, profile and machine (CPU model, cores,
AVX-512, torch's kernel level). No verdict reads it: wall time ranks machine load.

A stage's independent runs (`common.parallel.run_jobs`) log each run's seconds; the record keeps
them, and the tables estimate the stage's time with more cores from them (`on_cores`).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from common.errors import ArgumentParser, DataError, exit_on_user_error
from common.eval.report import replace_between_markers, write_readme
from common.io import load_json, write_json
from common.parallel import JOB_SECONDS

log = logging.getLogger("stage_times")
ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "timings"
PIPELINES = {"root": "dvc.yaml", **{path.parent.name: str(path.relative_to(ROOT))
                                    for path in sorted((ROOT / "papers").glob("*/dvc.yaml"))}}
PAGES = {"root": "docs/pipelines.md", **{paper: f"docs/{paper}/scale-and-time.md" for paper in PIPELINES
                                         if paper != "root"}}
# A pipeline's stages go into its page; every record's total into the summary of docs/pipelines.md.
BEGIN, END = "<!-- stage-times -->", "<!-- /stage-times -->"
SUMMARY_PAGE, SUMMARY_BEGIN, SUMMARY_END = "docs/pipelines.md", "<!-- pipeline-times -->", "<!-- /pipeline-times -->"
WORKERS_BEGIN, WORKERS_END = "<!-- stage-workers -->", "<!-- /stage-workers -->"  # on the summary page
RUNNING = re.compile(r"^Running stage '(?P<stage>[^']+)':")
KEPT = re.compile(r"^Stage '(?P<stage>[^']+)' didn't change, skipping")
JOBS = re.compile(re.escape(JOB_SECONDS).replace("%d", r"(?P<workers>\d+)").replace("%s", r"(?P<seconds>\[.*\])"))
CORES = (1, 4, 8, 16)  # the estimates the tables show, beside the record's own core count


def stage_times(lines: list[tuple[float, str]], finished: float) -> list[dict]:
    """Per stage, in the order DVC took them: seconds from its "Running stage" line to the next
    stage's line or to `finished`, and its independent runs' seconds (`jobs`: one entry per call of
    `run_jobs`); kept stages with no time. `lines` are (monotonic time, text)."""
    stages, running = [], None
    for stamp, text in lines:
        ran, kept = RUNNING.match(text), KEPT.match(text)
        if (ran or kept) and running is not None:
            running["seconds"] = stamp - running.pop("_start")
            running = None
        if ran:
            running = {"stage": ran["stage"], "ran": True, "_start": stamp, "jobs": []}
            stages.append(running)
        elif kept:
            stages.append({"stage": kept["stage"], "ran": False, "seconds": None})
        elif running is not None and (jobs := JOBS.search(text)):
            running["jobs"].append({"workers": int(jobs["workers"]), "seconds": json.loads(jobs["seconds"])})
    if running is not None:
        running["seconds"] = finished - running.pop("_start")
    return stages


def machine() -> dict:
    """The CPU the stages ran on (model and flags from Linux's /proc/cpuinfo) and torch's kernel level."""
    import torch

    cpuinfo = Path("/proc/cpuinfo")
    info = cpuinfo.read_text() if cpuinfo.is_file() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                 "unknown CPU")
    return {"cpu": model, "cores": os.cpu_count(), "avx512": " avx512f" in info,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}


def git(*args: str, cwd: Path = ROOT) -> str:
    """git's output, stripped; `subprocess.CalledProcessError` (with git's stderr) when it fails."""
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def checkout(cwd: Path = ROOT) -> tuple[str, bool]:
    """The checkout's short commit, and whether its tracked files are as committed."""
    return git("rev-parse", "--short", "HEAD", cwd=cwd), not git("status", "--porcelain", "--untracked-files=no",
                                                                   cwd=cwd)


def run(pipeline: str, out: Path, force: bool = False) -> int:
    """`dvc repro` of the pipeline (every stage with `force`), its output passed through, each stage
    timed; the record to `out`."""
    from common.config import active_profile, load_yaml

    repro = ["repro", *(["-f"] if force else []), PIPELINES[pipeline]]
    command = [sys.executable, "-m", "dvc", *repro]
    # Stage commands call `python`: this interpreter's, as under `make`.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # The tree as the run found it: the run itself rewrites locks and results.
    commit, clean = checkout()
    started, lines = time.monotonic(), []
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as process:
        for text in process.stdout:
            lines.append((time.monotonic(), text.rstrip("\n")))
            sys.stdout.write(text)
            sys.stdout.flush()
    finished = time.monotonic()
    if process.returncode != 0:
        log.error("`dvc %s` failed; no record written", " ".join(repro))
        return process.returncode
    stages = stage_times(lines, finished)
    profile = active_profile(load_yaml(ROOT / "params.yaml"), where="params.yaml")
    record = {"pipeline": pipeline, "command": f"dvc {' '.join(repro)}", "profile": profile,
              "commit": commit, "tree_clean": clean,
              "date": datetime.date.today().isoformat(), "machine": machine(),
              "total_seconds": finished - started, "stages": stages}
    write_json(out, record)
    log.info("%s: %.1f min; wrote %s", pipeline, record["total_seconds"] / 60, out)
    return 0


def makespan(seconds: list[float], workers: int) -> float:
    """When the last of these jobs ends, handed out in this order to `workers` processes that each
    take the next job when free (as `run_jobs`' pool does)."""
    free = [0.0] * workers
    for job in seconds:
        free[free.index(min(free))] += job
    return max(free)


def on_cores(stage: dict, cores: int) -> float:
    """An estimate of the stage's time with `cores` workers: each call of `run_jobs` takes the
    makespan of its jobs on that many workers instead of on the record's, every job as long as it
    took in the record (a faster or slower core, or runs that slow one another down, change that),
    and the rest of the stage (start-up, data, scoring in the caller) as long as it did."""
    return stage["seconds"] + sum(makespan(call["seconds"], cores) - makespan(call["seconds"], call["workers"])
                                  for call in stage["jobs"])


def _estimates(stage: dict) -> str:
    if "jobs" not in stage:  # recorded before runs logged their seconds
        return "not recorded"
    if not stage["jobs"]:
        return "the same: one process"
    return ", ".join(f"{cores}: {_duration(on_cores(stage, cores))}" for cores in CORES)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def pipeline_stages(pipeline: str) -> list[str]:
    """The stages a pipeline's dvc.yaml declares, named as DVC names them in its output."""
    from common.config import load_yaml

    names = list(load_yaml(ROOT / PIPELINES[pipeline])["stages"])
    return names if pipeline == "root" else [f"{PIPELINES[pipeline]}:{name}" for name in names]


def table(record: dict, declared: list[str]) -> str:
    """The record as a page's table: a row per stage that ran, one per stage of `declared` that DVC
    kept (its committed outputs up to date, as in a fresh clone), then the whole run."""
    cpu = record["machine"]
    avx = "with AVX-512" if cpu["avx512"] else "without AVX-512"
    ran = {stage["stage"]: stage for stage in record["stages"] if stage["ran"]}
    rows = [f"| `{name.split(':')[-1]}`{' (root)' if ':' not in name and record['pipeline'] != 'root' else ''} | "
            f"{_duration(stage['seconds'])} | {_estimates(stage)} |" for name, stage in ran.items()]
    rows += [f"| `{name.split(':')[-1]}` | kept: its committed outputs were up to date | |"
             for name in declared if name not in ran]
    return (f"_Generated by `python -m common.stage_times render` from `timings/{record['pipeline']}.json`, "
            f"measured by `python -m common.stage_times run {record['pipeline']}` ({record['command']}) at "
            f"`{record['profile']}` on {record['date']}, commit {record['commit']}"
            f"{'' if record['tree_clean'] else ' with local changes'}: {cpu['cores']} cores of an {cpu['cpu']} "
            f"{avx} (torch kernels: {cpu['torch_cpu_capability']}). A stage's time includes its start-up and "
            f"DVC's hashing. {ESTIMATE_NOTE}_\n\n"
            f"| stage | time | with N cores (estimate) |\n| --- | --- | --- |\n" + "\n".join(rows) +
            f"\n| the pipeline | {_duration(record['total_seconds'])} | {_pipeline_estimates(record)} |\n")


ESTIMATE_NOTE = ("With N cores, an estimate: each of the stage's independent runs takes as long as it took here, "
                 "and they run N at a time, each worker taking the next run when free; the rest of the stage "
                 "takes as long as here.")


def _pipeline_estimates(record: dict) -> str:
    ran = [stage for stage in record["stages"] if stage["ran"]]
    if any("jobs" not in stage for stage in ran):
        return "not recorded"
    def total(cores: int) -> float:
        return record["total_seconds"] + sum(on_cores(stage, cores) - stage["seconds"] for stage in ran)

    return ", ".join(f"{cores}: {_duration(total(cores))}" for cores in CORES)


def summary(records: dict[str, dict]) -> str:
    """One row per recorded pipeline: its time, its three longest stages, and where it was measured."""
    rows = []
    for pipeline, record in records.items():
        longest = sorted((s for s in record["stages"] if s["ran"]), key=lambda s: -s["seconds"])[:3]
        cpu = record["machine"]
        rows.append(f"| {pipeline} | {_duration(record['total_seconds'])} | "
                    + ", ".join(f"`{s['stage'].split(':')[-1]}` {_duration(s['seconds'])}" for s in longest) +
                    f" | {cpu['cores']} cores, {'' if cpu['avx512'] else 'no '}AVX-512 | "
                    f"{record['date']}, {record['commit']} | {_pipeline_estimates(record)} |")
    if set(records) == set(PIPELINES):  # `make repro` runs them all; the root's data stages count once a paper
        total = sum(record["total_seconds"] for record in records.values())
        rows.append(f"| all (`make repro`, at most) | {total / 3600:.1f} h | | | | |")
    return ("_Generated by `python -m common.stage_times render` from `timings/*.json`; each pipeline measured by "
            "`python -m common.stage_times run <pipeline>` at `tiny`. A paper's run includes the root data stages it "
            f"reads, and a stage whose committed outputs are up to date is kept, as in a fresh clone. {ESTIMATE_NOTE} "
            "Each paper's scale-and-time page gives it per stage._\n\n"
            "| pipeline | time | longest stages | machine | measured | with N cores (estimate) |\n"
            "| --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")


def workers(records: dict[str, dict]) -> str:
    """Per stage whose record has its runs' seconds: how busy the runs kept the stage's workers (the
    runs' own seconds over the workers times the stage's wall time)."""
    rows = []
    for pipeline, record in records.items():
        for stage in record["stages"]:
            for jobs in (jobs for jobs in stage.get("jobs") or [] if jobs["seconds"]):  # [] when nothing was left
                own = sum(jobs["seconds"])
                rows.append(f"| {pipeline} | `{stage['stage'].split(':')[-1]}` | {len(jobs['seconds'])} | "
                            f"{jobs['workers']} | {_duration(own)} | {_duration(stage['seconds'])} | "
                            f"{own / (jobs['workers'] * stage['seconds']):.0%} |")
    if not rows:
        return "_No record holds its runs' seconds yet: `python -m common.stage_times run <pipeline>`._\n"
    return ("_Generated by `python -m common.stage_times render` from the same records. Start-up, loading data and "
            "a stage's own work after its runs count as idle._\n\n"
            "| pipeline | stage | runs | workers | runs' own time | stage | busy |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")


def write_between(page: Path, begin: str, end: str, body: str) -> None:
    write_readme(page, replace_between_markers(page.read_text(), begin, end, body))


def render() -> None:
    """Every record's table into its pipeline's page, and the summary of them all."""
    records = {pipeline: load_json(RECORDS / f"{pipeline}.json", f"`python -m common.stage_times run {pipeline}`")
               for pipeline in PIPELINES if (RECORDS / f"{pipeline}.json").is_file()}
    if not records:
        raise DataError(f"{RECORDS}: no records of stage times; measure a pipeline with "
                        "`python -m common.stage_times run <pipeline>`")
    for pipeline, record in records.items():
        write_between(ROOT / PAGES[pipeline], BEGIN, END, table(record, pipeline_stages(pipeline)))
        log.info("wrote the stage times of %s into %s", pipeline, PAGES[pipeline])
    write_between(ROOT / SUMMARY_PAGE, SUMMARY_BEGIN, SUMMARY_END, summary(records))
    write_between(ROOT / SUMMARY_PAGE, WORKERS_BEGIN, WORKERS_END, workers(records))


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m common.stage_times", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    timed = commands.add_parser("run", help="run and time one pipeline with `dvc repro`")
    timed.add_argument("pipeline", choices=list(PIPELINES))
    timed.add_argument("--out", type=Path, default=None, help="the record (default: timings/<pipeline>.json)")
    timed.add_argument("--force", action="store_true",
                       help="run every stage, also those whose committed outputs are up to date (`dvc repro -f`)")
    commands.add_parser("render", help="write every recorded pipeline's times into the docs pages")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args.pipeline, args.out or RECORDS / f"{args.pipeline}.json", args.force)
    render()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    sys.exit(main())
