"""Models built from the block library, and loaders for Hugging Face checkpoints."""
