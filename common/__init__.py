"""Shared library: blocks, models, data, training and evaluation for all three papers."""

import os

# libgomp's default active spin-waiting makes multi-threaded torch up to 50x slower on small
# tensors whenever another process holds a core (measured on a 2-core machine: 150 vs 8 GFLOP/s
# for the same 128-row matmul). Passive waiting costs little on a quiet machine. It only takes
# effect if set before torch loads, which `python -m common...` / `papers...` entry points ensure;
# an OMP_WAIT_POLICY already in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
