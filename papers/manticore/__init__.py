"""Manticore (Roberts et al.): hybrids of pretrained models joined by projectors and searched mixture weights."""
