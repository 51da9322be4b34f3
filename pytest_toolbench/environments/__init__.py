"""Environments the benchmarks run in, each usable without pytest: text retrieval (embedder +
FAISS + on-disk embedding cache); the tool sandbox lives in ``pytest_toolbench.sandbox``."""
