"""The benchmark tables of `benchmarks/README.md` and `docs/blocks-and-tasks.md`, generated from the
results the scripts of this folder wrote (benchmarks/results/<name>.json), so that no figure in them
is typed:

    python -m benchmarks.page

Each table stands between two markers naming it (`<!-- bench cpu -->` ... `<!-- /bench cpu -->`).
A row's target is the benchmark's declared one; whether it is met is computed here, from the
same numbers the row shows.
"""

from __future__ import annotations

import argparse
import math
import operator
import sys
from pathlib import Path

from common.errors import ArgumentParser, DataError, exit_on_user_error
from common.eval.report import read_results, replace_between_markers, write_readme
from common.io import load_json

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TABLES = {**{name: "benchmarks/README.md" for name in ("cpu", "parallel_split", "allocator_faults", "gpu")},
          "task_speed": "docs/blocks-and-tasks.md", "task_learnability": "docs/blocks-and-tasks.md"}
COMPARE = {">=": operator.ge, "<=": operator.le}


def markers(table: str) -> tuple[str, str]:
    return f"<!-- bench {table} -->", f"<!-- /bench {table} -->"


def significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant figures, never in exponent form (1,234 keeps its four)."""
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def seconds(value: float) -> str:
    return f"{significant(value)} s" if value >= 1 else f"{significant(value * 1e3)} ms"


def mib(value: float) -> str:
    return f"{value:,.0f} MiB"


def target(ratio: float, op: str, bound: float, text: str) -> str:
    """The ratio cell: bold when the declared target `op bound` holds, marked not met when it fails."""
    if COMPARE[op](ratio, bound):
        return f"**{text}**"
    return f"{text}: **not met**"


def faster(ratio: float) -> str:
    return f"{significant(ratio)}× faster"


def of_its_time(ratio: float) -> str:
    return f"{significant(ratio)}× its time"


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def mamba_speed(r: dict) -> list[str]:
    c, t = r["config"], r["training"]
    step, ratios = t["seconds_per_step"], t["ratios"]
    name = (f"Mamba LM fwd+bwd, {c['n_layers']} layers, d={c['d_model']}, batch {c['batch']}×{c['seq_len']} "
            "(`mamba_speed`)")
    ours = seconds(step["ours"])
    return [row(name, ours, f"`transformers` slow path {seconds(step['hf_slow'])}",
                target(ratios["hf_slow/ours"], ">=", 30, faster(ratios["hf_slow/ours"])), "≥ 30×"),
            row("same", ours, f"`mambapy` {r['versions']['mambapy']} (parallel scan) {seconds(step['mambapy'])}",
                target(ratios["mambapy/ours"], ">=", 2, faster(ratios["mambapy/ours"])), "≥ 2×"),
            row("same", ours, f"GPT-Neo of the same size {seconds(step['gptneo'])}",
                target(ratios["ours/gptneo"], "<=", 3, of_its_time(ratios["ours/gptneo"])), "≤ 3×")]


def moe_speed(r: dict) -> list[str]:
    """The run at the most threads; its first size is BlackMamba's (8 experts, top-1), then the others."""
    run = max(r["runs"], key=lambda run: run["threads"])
    first, *others = run["configs"]
    med, ratios = first["median_s"], first["ratios"]
    name = (f"MoE fwd+bwd, {first['n_experts']} experts, top-{first['top_k']}, {first['n_tokens']:,} tokens, "
            f"d={first['d_model']}, {run['threads']} threads (`moe_speed`)")
    ours = seconds(med["ours_sinkhorn"])
    lines = [row(name, ours, f"dense SwiGLU of the active size {seconds(med['dense'])}",
                 target(ratios["ours_sinkhorn_over_dense"], "<=", r["targets"]["ours_over_dense_at_most"],
                        of_its_time(ratios["ours_sinkhorn_over_dense"])),
                 f"≤ {r['targets']['ours_over_dense_at_most']}×"),
             row("same", ours, f"official per-expert gather loop {seconds(med['loop'])}",
                 target(ratios["loop_over_ours_sinkhorn"], ">=", r["targets"]["loop_over_ours_at_least"],
                        faster(ratios["loop_over_ours_sinkhorn"])),
                 f"≥ {r['targets']['loop_over_ours_at_least']:g}×")]
    for size in others:
        med, ratios = size["median_s"], size["ratios"]
        lines.append(row(f"same, {size['n_experts']} experts of d={size['d_model']}, d_ff={size['d_ff']}",
                         f"{seconds(med['ours_sinkhorn'])} ({seconds(med['ours_grouped_mm'])} with `_grouped_mm`)",
                         f"official loop {seconds(med['loop'])}",
                         f"{faster(ratios['loop_over_ours_sinkhorn'])} "
                         f"({significant(ratios['loop_over_ours_grouped_mm'])}×)", ""))
    return lines


def _kib(n_bytes: int) -> str:
    return f"{n_bytes / 2**10:,.0f} KiB" if n_bytes < 2**20 else f"{n_bytes / 2**20:,.0f} MiB"


def generation(r: dict) -> list[str]:
    mamba, kv = r["results"]["mamba"], r["results"]["transformer_kv_cache"]
    lengths = [str(n) for n in r["config"]["lengths"]]
    first, last = lengths[0], lengths[-1]
    c = r["config"]
    name = f"Generation at {int(last):,} tokens, {c['layers']} layers, d={c['d_model']}, batch 1 (`generation`)"
    speedup = f"{significant(r['results']['transformer_over_mamba_ms_per_token_at_last'], 2)}× faster"
    # the declared target is Mamba's cache staying flat as the sequence grows, not the speedup
    speedup_cell = f"**{speedup}**" if mamba["cache_growth_first_to_last"] == 1 else f"{speedup}: **not met**"
    return [row(name, f"Mamba {significant(mamba[last]['ms_per_token'], 2)} ms/token, cache "
                      f"{_kib(mamba[last]['cache_bytes'])}",
                f"transformer with KV cache {significant(kv[last]['ms_per_token'], 2)} ms/token, "
                f"{_kib(kv[last]['cache_bytes'])}",
                speedup_cell, "Mamba's cache flat"),
            row(f"Generation latency from {int(first):,} to {int(last):,} tokens",
                f"Mamba {significant(mamba[first]['ms_per_token'], 2)} → "
                f"{significant(mamba[last]['ms_per_token'], 2)} ms (×{mamba['latency_growth_first_to_last']:.2f})",
                f"transformer {significant(kv[first]['ms_per_token'], 2)} → {significant(kv[last]['ms_per_token'], 2)}"
                f" ms (×{kv['latency_growth_first_to_last']:.2f})", "", "")]


def mixer_memory(r: dict) -> list[str]:
    by = {(x["model"], x["n_ctx"]): x for x in r["results"]}
    lengths = sorted({x["n_ctx"] for x in r["results"]})
    c = r["config"]
    n = 2048 if 2048 in lengths else lengths[-1]
    ratio = by[("mixer", n)]["peak_mib"] / by[("llama_eager", n)]["peak_mib"]
    name = (f"Masked mixer fwd+bwd peak memory, d={c['d_model']}, {c['n_layers']} layers, n_ctx {n} "
            f"(`mixer_memory`)")
    mixer = mib(by[("mixer", n)]["peak_mib"])
    lines = [row(name, mixer, f"Llama, eager attention, {mib(by[('llama_eager', n)]['peak_mib'])}",
                 target(ratio, "<=", 0.5, f"{ratio:.2f}×"), "≤ 0.5×"),
             row("same", mixer, f"Llama, SDPA, {mib(by[('llama_sdpa', n)]['peak_mib'])}",
                 f"{by[('mixer', n)]['peak_mib'] / by[('llama_sdpa', n)]['peak_mib']:.2f}×", "")]
    for other in (k for k in lengths if k > n):
        m, e, s = by[("mixer", other)], by[("llama_eager", other)], by[("llama_sdpa", other)]
        lines.append(row(f"same, n_ctx {other}", f"{mib(m['peak_mib'])}, {seconds(m['time_min_s'])}",
                         f"eager {mib(e['peak_mib'])}, {seconds(e['time_min_s'])}; "
                         f"SDPA {mib(s['peak_mib'])}, {seconds(s['time_min_s'])}",
                         f"{m['peak_mib'] / e['peak_mib']:.2f}× eager, {m['peak_mib'] / s['peak_mib']:.2f}× SDPA", ""))
    return lines


def blackmamba_step(r: dict) -> list[str]:
    c, res, ratio = r["config"], r["results"], r["blackmamba_over_dense_mamba"]
    name = f"BlackMamba training step, d={c['d_model']}, {c['layers']} layers, batch {c['batch']}×{c['n_ctx']} " \
           "(`blackmamba_step`)"
    return [row(name, seconds(res["blackmamba"]["median_s"]),
                f"dense Mamba of the same active size (`mamba,swiglu`) {seconds(res['dense_mamba']['median_s'])}",
                target(ratio, "<=", 1.5, of_its_time(ratio)), "≤ 1.5×")]


def manticore_overhead(r: dict) -> list[str]:
    c, med, ratio = r["config"], r["median_s"], r["manticore_over_sum_of_components"]
    name = f"Manticore[GPT-Neo, Mamba] forward, d={c['d_model']}, {c['blocks']} blocks, batch {c['batch']}×" \
           f"{c['n_ctx']} (`manticore_overhead`)"
    return [row(name, seconds(med["manticore"]), f"GPT-Neo {seconds(med['gpt_neo'])} + Mamba {seconds(med['mamba'])}",
                target(ratio, "<=", 1.15, f"{significant(ratio)}× the sum"), "≤ 1.15×")]


def parallel_runs(r: dict) -> list[str]:
    c, s, split = r["config"], r["seconds"], r["where_time_goes"]
    models = ", ".join(f"{name} ({c['patterns'][name].replace(',', ' + ')}, d={c['d_model'][name]})"
                       for name in c["models"])
    name = (f"A stage's independent runs: {len(c['seeds'])} seeds × {len(c['models'])} models "
            f"({models}), {c['steps']} MAD steps each (`parallel_runs`, `common/parallel.py`)")
    ours = f"2 worker processes × 1 thread: {seconds(s['two_workers_one_thread'])}"
    return [row(name, ours, "the same runs one after another with 2 threads (how stages ran them): "
                            f"{seconds(s['serial_two_threads'])}",
                target(r["speedup_over_serial_two_threads"], ">=", 1.8, faster(r["speedup_over_serial_two_threads"])),
                "≥ 1.8×"),
            row("same", seconds(s["two_workers_one_thread"]),
                "one after another with 1 thread (the serial run whose results the workers match "
                f"{'exactly' if r['parallel_equals_serial'] else 'NOT exactly'}): {seconds(s['serial_one_thread'])}",
                target(r["speedup_over_serial_one_thread"], ">=", 1.8, faster(r["speedup_over_serial_one_thread"]))
                + f"; {significant(split['speedup_without_start_up_and_idle'])}× without start-up and idle", "≥ 1.8×")]


ALLOCATOR_NETWORKS = {"mixer_flat": "flat mixer", "blackmamba": "BlackMamba",
                      "manticore_specialists": "Manticore `specialists` hybrid"}


def network_shape(shape: dict) -> str:
    """A network's shape as the benchmark recorded it, e.g. "d=64, 4 layers, 0.41M parameters"."""
    parts = [f"d={shape['d_model']}"]
    parts += [f"{shape[key]} {key}" for key in ("layers", "experts") if key in shape]
    if "components" in shape:
        parts.append(f"{' + '.join(shape['components'])}, {shape['blocks']} block{'s' * (shape['blocks'] != 1)}")
    return ", ".join(parts + [f"{shape['parameters'] / 1e6:.2f}M parameters"])


def allocator(r: dict) -> list[str]:
    lines = []
    for k, (network, what) in enumerate(ALLOCATOR_NETWORKS.items()):
        run, shape = r["training"][network], r["config"]["networks"][network]
        name = f"{what} ({network_shape(shape)}), {shape['batch']}×{shape['n_ctx']}"
        if k == 0:
            name = (f"Training step, {r['config']['threads']} thread, `tiny` shapes (`allocator`, "
                    f"`common/training/trainer.py:keep_freed_memory`, set by every training run): {name}")
        else:
            name = "same, " + name
        speedup = run["speedup"]
        gain = faster(speedup) if speedup > 1 else f"{significant(speedup)}×: no gain measured"
        losses = "losses bit-identical" if run["identical_losses"] else "losses **differ**"
        lines.append(row(name, seconds(run["keep_freed_memory"]["ms_per_step"] / 1e3),
                         ("glibc's default malloc (a fresh mmap for every tensor above 32 MB) " if k == 0 else "")
                         + seconds(run["glibc_default"]["ms_per_step"] / 1e3), f"{gain}, {losses}", ""))
    return lines


def parallel_split(r: dict) -> str:
    split, serial = r["where_time_goes"], r["seconds"]["serial_one_thread"]
    best = split["best_split_over_half_sum"] * serial / 2
    return "\n".join([
        f"- contention: a run trains {split['contention']:.2f}× as long beside another as alone (shared caches and "
        "memory; the cores are two, one thread each);",
        f"- split: the best of every split of the {r['config']['jobs']} runs between two workers gives one worker "
        f"{best:.1f} s of the serial times, {split['best_split_over_half_sum']:.2f}× half their {serial:.0f} s sum;",
        f"- start-up and idle: {split['start_up_and_idle_s']:.1f} s (spawning the workers, which import torch and "
        "Lightning, and the end's idle worker)."])


def allocator_faults(r: dict) -> str:
    lines = []
    for network, what in ALLOCATOR_NETWORKS.items():
        run = r["training"][network]
        lines.append(f"- {what}: {run['glibc_default']['minor_faults_per_step']:,.0f} minor page faults a step by "
                     f"default, {run['keep_freed_memory']['minor_faults_per_step']:,.0f} with memory kept;")
    fill = r["zero_fill_67mb_ms"]
    lines.append(f"- zero-filling one 67 MB tensor: {fill['glibc_default']:.0f} ms by default against "
                 f"{fill['keep_freed_memory']:.0f} ms with memory kept.")
    return "\n".join(lines)


CPU_ROWS = {"mamba_speed": mamba_speed, "moe_speed": moe_speed, "generation": generation,
            "mixer_memory": mixer_memory, "blackmamba_step": blackmamba_step,
            "manticore_overhead": manticore_overhead, "parallel_runs": parallel_runs, "allocator": allocator}


def cpu_table(results: dict[str, dict]) -> str:
    lines = ["| benchmark | ours | peer | ratio | target |", "| --- | --- | --- | --- | --- |"]
    for name, rows in CPU_ROWS.items():
        lines += rows(results[name])
    return "\n".join(lines)


def gpu_table(r: dict) -> str:
    """`cuda_kernels.json`: its three sections, each a separate device call."""
    lines = ["| benchmark | ours | peer | ratio |", "| --- | --- | --- | --- |"]
    if "mamba_with_kernels" in r:
        c, res = r["mamba_with_kernels"]["config"], r["mamba_with_kernels"]["results"]
        cuda, chunked, hf = res["ours_cuda"], res["ours_chunked"], res["hf_mamba_ssm_kernels"]
        name = f"Mamba LM fwd+bwd, {c['n_layers']} layers, d={c['d_model']}, batch {c['batch']}×{c['seq']}"
        on_kernels = f"our block on `mamba-ssm`'s kernels (`scan: cuda`) {seconds(cuda['median_s'])}"
        lines += [row(name, f"{on_kernels}, {cuda['peak_mib'] / 1024:.1f} GiB",
                      f"`transformers`' `MambaForCausalLM` on the same kernels {seconds(hf['median_s'])}",
                      of_its_time(cuda['median_s'] / hf['median_s'])),
                  row("same", f"our chunked scan (`scan: chunked`, the path without the kernels) "
                              f"{seconds(chunked['median_s'])}, {chunked['peak_mib'] / 1024:.1f} GiB",
                      f"our block on the kernels {seconds(cuda['median_s'])}",
                      f"{chunked['median_s'] / cuda['median_s']:.0f}× slower")]
    if "mamba_without_kernels" in r:
        res = r["mamba_without_kernels"]["results"]
        hf, chunked = res["hf_pytorch_path"], res["ours_chunked"]
        lines.append(row("same, kernels hidden", f"our chunked scan {seconds(chunked['median_s'])}",
                         f"`transformers`' PyTorch path {seconds(hf['median_s'])}, {hf['peak_mib'] / 1024:.1f} GiB",
                         faster(hf['median_s'] / chunked['median_s'])))
    if "attention" in r:
        a = r["attention"]
        lengths = sorted(a["results"], key=int)
        res = [a["results"][n] for n in lengths]

        def across(model: str, key: str, fmt) -> str:
            return " / ".join(fmt(x[model][key]) for x in res)

        def ratio(model: str) -> str:
            return " / ".join(f"{x['mixer']['peak_mib'] / x[model]['peak_mib']:.2f}×" for x in res)

        mixer = across("mixer", "peak_mib", lambda v: f"{v:,.0f}") + " MiB"
        name = (f"Masked mixer fwd+bwd peak memory, d={a['d_model']}, {a['n_layers']} layers, batch {a['batch']}, "
                f"n_ctx {' / '.join(lengths)}")
        lines += [row(name, mixer, f"Llama, eager attention, {across('llama_eager', 'peak_mib', lambda v: f'{v:,.0f}')}"
                                   " MiB", ratio("llama_eager")),
                  row("same", mixer, f"Llama, SDPA, {across('llama_sdpa', 'peak_mib', lambda v: f'{v:,.0f}')} MiB",
                      ratio("llama_sdpa")),
                  row("same, step time", across("mixer", "median_s", lambda v: f"{v * 1e3:.1f}") + " ms",
                      f"eager {across('llama_eager', 'median_s', lambda v: f'{v * 1e3:.1f}')} ms; "
                      f"SDPA {across('llama_sdpa', 'median_s', lambda v: f'{v * 1e3:.1f}')} ms", "")]
    for size in r.get("moe", {}).get("sizes", []):
        res = size["results"]
        shape = (f"MoE fwd+bwd, {size['n_experts']} experts, top-{size['top_k']}, {size['n_tokens']:,} tokens, "
                 f"d={size['d_model']}, d_ff={size['d_ff']}")
        mine = [(label, res[key]) for label, key in (("sigmoid router, `torch._grouped_mm`", "ours_sigmoid_auto"),
                                                      ("Sinkhorn router, `_grouped_mm`", "ours_sinkhorn_auto"),
                                                      ("Sinkhorn, autograd loop", "ours_sinkhorn_autograd"))
                if "median_s" in res[key]]
        for k, (label, ours) in enumerate(mine):
            lines.append(row(shape if k == 0 else "same", f"{label} {seconds(ours['median_s'])}",
                             f"the released per-expert loop {seconds(res['released_loop']['median_s'])}",
                             faster(res["released_loop"]["median_s"] / ours["median_s"])))
        if "median_s" in res["ours_sinkhorn_auto"]:
            lines.append(row("same", f"Sinkhorn, `_grouped_mm` {seconds(res['ours_sinkhorn_auto']['median_s'])}",
                             f"dense SwiGLU of the active size {seconds(res['dense']['median_s'])}",
                             of_its_time(res["ours_sinkhorn_auto"]["median_s"] / res["dense"]["median_s"])))
        failed = [key for key, value in res.items() if "error" in value]
        if failed:
            lines.append(row("same", f"{', '.join(f'`{key}`' for key in failed)}: {res[failed[0]]['error']}", "", ""))
    return "\n".join(lines)


def gpu_caption(r: dict) -> str:
    dates = sorted({section["date"] for section in r.values() if isinstance(section, dict) and "date" in section})
    return (f"_`benchmarks/results/cuda_kernels.json`: one {r['device']}, torch {r['torch']}, {r['precision']}; "
            f"medians of {r['reps']} synchronised steps after {r['warmup']} warm-ups; {', '.join(dates)}._")


def task_speed_table(r: dict) -> str:
    fuzzy, path, suite = r["fuzzy_recall_v128_l128"], r["pathfinder32_1000"], r["tiny_suite"]
    loads = [part[key] for part in (fuzzy, path, suite) for key in ("load_before", "load_after")]
    mad = [part for part in suite["parts_s"] if part.startswith("mad")]
    others = [part for part in suite["parts_s"] if part not in mad]
    lines = ["| what | ours | reference | target |", "| --- | --- | --- | --- |",
             row("fuzzy in-context recall, V 128, L 128, one core", f"{fuzzy['ours_instances_per_s']:,.0f} instances/s",
                 f"{fuzzy['peer']} {fuzzy['peer_instances_per_s']:.1f}/s",
                 f"≥ {fuzzy['target_instances_per_s']:,}/s" + ("" if fuzzy["met"] else ": **not met**")),
             row(f"Pathfinder-{path['size']}, {path['images']:,} images", seconds(path["median_s"]), "", ""),
             row(f"the whole `tiny` suite ({len(mad)} MAD tasks, {', '.join(others)})", seconds(suite["total_s"]), "",
                 f"≤ {suite['target_s']} s" + ("" if suite["met"] else ": **not met**"))]
    caption = (f"_`python -m benchmarks.task_speed` ({r['date'][:10]}, {r['cpu_count']} cores, numpy {r['numpy']}); "
               f"1-minute load average {min(loads):.1f}-{max(loads):.1f} while it ran._")
    slow = [f"{part} ({seconds(s)})" for part, s in suite["parts_s"].items() if s > 1]
    return (caption + "\n\n" + "\n".join(lines) + "\n\nParts of the `tiny` suite that take more than a second: "
            + (", ".join(slow) or "none") + ".")


def task_learnability_table(r: dict) -> str:
    models = list(r["models"])
    lines = ["| task at `tiny` | chance | " + " | ".join(f"{m} (`{r['models'][m]}`)" for m in models) + " |",
             "| --- " * (len(models) + 2) + "|"]
    for task in r["tasks"]:
        scores = [task["accuracy"][m] for m in models]
        lines.append(row(f"{task['name']}, {task['steps']:,} steps", f"{task['chance']:.3f} ({task['chance_is']})",
                         *(f"{s:.3f}" for s in scores)))
    caption = (f"_`python -m benchmarks.task_learnability` (accuracy on the held-out split: MAD's test split, "
               f"ListOps' validation split; seed {r['seed']}, one thread per run; {r['machine']})._")
    return caption + "\n\n" + "\n".join(lines)


def load_results() -> dict[str, dict]:
    """Every benchmark's results by name."""
    results = {path.stem: load_json(path, "rerun its benchmark (`make bench`)")
               for path in sorted(RESULTS.glob("*.json"))}
    missing = [name for name in ("cuda_kernels", "task_speed", "task_learnability", *CPU_ROWS)
               if name not in results]
    if missing:
        raise DataError(f"{RESULTS}: no results for {', '.join(missing)}; run their benchmarks (`make bench`)")
    return results


def render(results: dict[str, dict], pages: dict[str, str]) -> dict[str, str]:
    """`pages` (path -> text) with every benchmark table between its markers regenerated from the
    benchmarks' `results`."""
    bodies = {"cpu": lambda: cpu_table(results),
              "parallel_split": lambda: parallel_split(results["parallel_runs"]),
              "allocator_faults": lambda: allocator_faults(results["allocator"]),
              "gpu": lambda: gpu_caption(results["cuda_kernels"]) + "\n\n" + gpu_table(results["cuda_kernels"]),
              "task_speed": lambda: task_speed_table(results["task_speed"]),
              "task_learnability": lambda: task_learnability_table(results["task_learnability"])}
    pages = dict(pages)
    for table, page in TABLES.items():
        body = read_results(bodies[table], RESULTS, "rerun the benchmark that wrote it")
        pages[page] = replace_between_markers(pages[page], *markers(table), body)
    return pages


@exit_on_user_error
def main(argv: list[str] | None = None) -> int:
    ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    pages = {page: (ROOT / page).read_text() for page in set(TABLES.values())}
    for page, text in render(load_results(), pages).items():
        write_readme(ROOT / page, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
