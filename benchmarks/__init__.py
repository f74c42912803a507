"""Performance comparisons against named peers; each script writes benchmarks/results/<name>.json."""
