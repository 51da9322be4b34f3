"""tests/upstream_diff/upstream_source.py: upstream functions taken by name from a file that does
not parse as a whole (upstream FamilyTool's post-processing script, under Python 3.11)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def _load_source_module():
    """The scripts' helper, loaded from its file (as test_sandbox_attacks loads the corpus runner),
    so that the folder of scripts never joins every test's ``sys.path``."""
    spec = importlib.util.spec_from_file_location(
        "upstream_diff_source", Path(__file__).resolve().parent / "upstream_diff" / "upstream_source.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


upstream_functions = _load_source_module().upstream_functions

SOURCE = '''import numpy as np
RATE = 3
GROUPS = {"a": [1], "b": [2]}
GROUPS["all"] = GROUPS["a"] + GROUPS["b"]

def double(x):
    return 2 * x

class Box:
    def __init__(self, v):
        self.v = double(v) + RATE

@decorated
def below():
    return f"{"nested"}" + )

def after_the_error():
    return 1
'''


def test_functions_above_an_unparsable_definition_are_taken(tmp_path):
    path = tmp_path / "upstream.py"
    path.write_text(SOURCE, encoding="utf-8")
    ns = upstream_functions(path, {"double", "Box"}, {"RATE": 10})
    assert ns["double"](4) == 8
    assert ns["Box"](1).v == 12  # module globals come from the namespace given, not the file
    assert "np" not in ns  # the module's imports are not run


def test_assigned_names_are_taken_with_every_statement_that_fills_them_in_file_order(tmp_path):
    path = tmp_path / "upstream.py"
    path.write_text(SOURCE, encoding="utf-8")
    ns = upstream_functions(path, {"GROUPS"}, {})
    assert ns["GROUPS"] == {"a": [1], "b": [2], "all": [1, 2]}
    assert "RATE" not in ns and "double" not in ns


def test_a_name_at_or_below_the_error_is_refused(tmp_path):
    path = tmp_path / "upstream.py"
    path.write_text(SOURCE, encoding="utf-8")
    with pytest.raises(SystemExit, match=r"no top-level \['after_the_error'\]"):
        upstream_functions(path, {"double", "after_the_error"}, {})
