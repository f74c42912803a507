"""BlackMamba (Anthony et al.): Mamba blocks alternating with Sinkhorn-routed mixture-of-experts MLPs."""
