"""Benchmarks: harnesses that import the product and measure it; nothing in the product
imports them (`proofnet bench ...` dispatches here)."""
