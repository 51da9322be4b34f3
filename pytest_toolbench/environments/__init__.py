"""Environments the benchmarks run in, each usable without pytest: text retrieval (embedder +
FAISS + on-disk embedding cache); the tool sandbox lives in ``pytest_toolbench.sandbox``."""

#: The offline default embedder: sentence-transformers/all-MiniLM-L6-v2 (384-d), from PyPI. Here,
#: not in ``retrieval`` (numpy, FAISS), so benchmark options can name it without importing those.
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
