"""Evaluation: metrics, parameter and FLOP counting, generation timing, result tables and plots."""
