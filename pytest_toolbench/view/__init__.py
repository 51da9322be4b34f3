"""``toolbench view``: a static site over recorded runs (leaderboard, runs, cases, side by side).

The pipeline is one module per step: load.py finds and reads the JSON records, groups.py says
which runs ran on the same data, the ``*_page.py`` modules turn records into page models, and
site.py renders them with Jinja2 into HTML plus ``.js`` data files that open from ``file://``
(no server: a downloaded CI artifact works). ``--toolbench-view DIR`` refreshes it at the end
of a pytest run (pytest_hook.py)."""
