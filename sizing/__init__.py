"""One-off sizing runs: the learning curves and controls that decide a stage's settings, outside the pipelines."""
