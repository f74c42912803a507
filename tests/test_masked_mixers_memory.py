"""The memory stage's options: `device: cuda` on a machine without CUDA is one clear config error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from papers.masked_mixers import memory

PARAMS = Path(__file__).resolve().parents[1] / "papers" / "masked_mixers" / "params.yaml"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_one_config_error_line(tmp_path, capsys):
    raw = yaml.safe_load(PARAMS.read_text())
    raw["profile"] = "smoke"
    raw["memory"]["smoke"].update(device="cuda", batch_size=16)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit) as excinfo:
        memory.main(["--params", str(params), "--out", str(tmp_path / "memory.json")])
    assert excinfo.value.code == 2
    errors = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error: ")]
    assert errors == ["error: memory.device: cuda, but no CUDA device is available here; use cpu or auto"]
    assert not (tmp_path / "memory.json").exists()
