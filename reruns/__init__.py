"""Tools about reruns of the pipelines: whether two runs agree (`python -m reruns.compare --help`)."""
