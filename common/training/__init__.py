"""Training: LightningModules, callbacks, optimisers, and `run_training`, the one entry point."""
