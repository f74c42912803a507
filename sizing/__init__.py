"""One-off measurements outside the pipelines: the learning curves and controls that decide a stage's
settings, and checks of what a stage's data hold (the held-out overlap)."""
