"""Masked Mixers (Badger 2024, arXiv 2409.01482, and the blog "Masked Mixers II") as a DVC
pipeline: fixed-compute CLM comparisons, input representation accuracy, generation, retrieval,
autoencoders, bidirectional language models and memory scaling. See README.md."""
