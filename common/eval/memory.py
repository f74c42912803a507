"""Resident memory of this process on Linux, for CPU memory measurements: the current size
(VmRSS) and the high-water mark (VmHWM), which `reset_peak` sets back to the current size."""

from __future__ import annotations

from pathlib import Path


def memory_mib() -> dict[str, float]:
    """Current (VmRSS) and peak-since-reset (VmHWM) resident memory of this process, in MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {key: int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM")}


def reset_peak() -> None:
    """Zero VmHWM (writing 5 to clear_refs), so the next `memory_mib` peak covers only what follows."""
    Path("/proc/self/clear_refs").write_text("5")
