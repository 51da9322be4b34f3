"""The pytest side of a run, behind the hook entry points of ``plugin.py``.

``state``: the controller's run state; ``selection``: which cases run and how they are
parametrised.
"""
