"""ToolBeHonest (ToolBH, EMNLP 2024): three levels of tool-hallucination diagnosis.

Layers, as for ToolHop: ``schema`` (record + loader for the real ``test_en.json``), ``prompts``
(the six byte-exact upstream prompts per record), ``scoring`` (L1 EM, L2/L3 PR, the L3 parser and
conditions), ``tooldb`` (per-subtask tool database, MiniLM + FAISS matching score), ``runner``,
``oracle``, ``report`` (paper Tables 2/3, error analysis, Overall from scenario numbers) and
``benchmark`` (the Benchmark protocol). Fixtures: ``fixtures/toolbehonest.py``.

Run: ``pytest suites/toolbehonest --model oracle`` (bundled sample) or
``--data-dir DIR`` with ``DIR/toolbehonest/test_en.json`` (the HF file, unchanged).
Recompute the Overall from per-scenario numbers:
``python -m pytest_toolbench.benchmarks.toolbehonest.report FILE.json``.
"""
