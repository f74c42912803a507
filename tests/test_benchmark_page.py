"""The benchmark tables of benchmarks/README.md and docs/blocks-and-tasks.md: rows built from results
as computed by hand here, targets judged from the numbers shown, and the committed pages current
with the committed results."""

from __future__ import annotations

import pytest

from benchmarks import page


def test_figures_keep_three_significant_digits_without_exponents():
    assert [page.significant(v) for v in (0.5464, 62.2087, 113.83, 1234.5, 0.0)] == ["0.546", "62.2", "114",
                                                                                     "1,234", "0"]
    assert [page.seconds(v) for v in (0.5464, 0.0199, 3.1487)] == ["546 ms", "19.9 ms", "3.15 s"]


def test_a_ratio_is_bold_when_its_target_holds_and_marked_when_it_fails():
    assert page.target(1.98, ">=", 1.8, "1.98× faster") == "**1.98× faster**"
    assert page.target(1.04, ">=", 2, "1.04× faster") == "1.04× faster: **not met**"
    assert page.target(0.49, "<=", 0.5, "0.49×") == "**0.49×**"


def test_mamba_speed_rows_divide_the_peers_time_by_ours():
    record = {"config": {"n_layers": 2, "d_model": 32, "batch": 4, "seq_len": 16}, "versions": {"mambapy": "9.9"},
              "training": {"seconds_per_step": {"ours": 0.5, "hf_slow": 50.0, "mambapy": 0.8, "gptneo": 0.25},
                           "ratios": {"hf_slow/ours": 100.0, "mambapy/ours": 1.6, "ours/gptneo": 2.0}}}
    rows = page.mamba_speed(record)
    assert rows[0] == ("| Mamba LM fwd+bwd, 2 layers, d=32, batch 4×16 (`mamba_speed`) | 500 ms | "
                       "`transformers` slow path 50.0 s | **100× faster** | ≥ 30× |")
    assert rows[1].endswith("| 1.60× faster: **not met** | ≥ 2× |")  # 0.8 / 0.5 below the 2× target
    assert rows[2].endswith("| **2.00× its time** | ≤ 3× |")


def test_parallel_split_recovers_the_busiest_worker_from_the_ratio():
    record = {"config": {"jobs": 6}, "seconds": {"serial_one_thread": 120.0},
              "where_time_goes": {"contention": 1.05, "best_split_over_half_sum": 1.1, "start_up_and_idle_s": 7.0}}
    text = page.parallel_split(record)
    assert "gives one worker 66.0 s of the serial times, 1.10× half their 120 s sum" in text  # 1.1 x 60


def test_committed_pages_are_current_with_the_committed_results():
    pages = {name: (page.ROOT / name).read_text() for name in set(page.TABLES.values())}
    assert page.render(page.load_results(), pages) == pages, "run `python -m benchmarks.page`"


def test_arguments_are_refused_with_status_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        page.main(["--what"])
    assert exit_.value.code == 2
