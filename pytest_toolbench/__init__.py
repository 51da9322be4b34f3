"""pytest-toolbench: tool-use benchmarks for LLMs as pytest suites.

Data flows through the package in one direction, and the sub-packages follow it:

    benchmarks/<name>/schema   dataset file -> validated records -> Cases
    benchmarks/<name>/runner   Case x model x environment -> transcript
    benchmarks/<name>/scoring  transcript -> CaseResult (results/case_result.py)
    results/                   CaseResults -> metrics with bootstrap CIs, subgroups, gates
    report/                    metrics -> terminal table, JSON, Allure
    plugin.py                  pytest glue only

Everything is importable without pytest running.
"""

__version__ = "0.1.0"
