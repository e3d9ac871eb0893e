"""Measuring models: the one FLOP counter, the model catalogue, throughput/memory benchmarks, diagnostics."""
