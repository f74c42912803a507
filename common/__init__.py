"""Shared library: blocks, models, data, training and evaluation for all three papers."""
