"""Benchmarks of issue 5: what the runtime adds on top of the model, measured against baselines."""
