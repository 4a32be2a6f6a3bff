"""Benchmarks: the numbers in BENCHMARKS.md and the README come from here, never from timed tests."""
