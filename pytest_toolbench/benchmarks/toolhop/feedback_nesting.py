"""How deep upstream's ``get_feedback`` decodes a call's arguments and encodes its result.

Its own module so the harness's runner and invocation-error checks can read the limit without
importing :mod:`~pytest_toolbench.benchmarks.toolhop.execution`: that module runs inside the
sandbox, and building its emulated script globals imports ``requests`` and ``tqdm`` (about 75 ms
and a few MB), which the zygote pays once and the pytest process need not pay at all.
"""

from __future__ import annotations

from pytest_toolbench.json_nesting import nesting_limit

#: ``get_feedback``'s frame in upstream's worker thread: ``threading`` (3), ``ThreadPoolExecutor``
#: (``_worker``, ``_WorkItem.run``), ``sample_process``, ``sample_process_<scenario>``, itself.
UPSTREAM_FEEDBACK_FRAME = 8
#: The deepest arguments ``get_feedback``'s ``json.loads`` decoded, and the deepest result its
#: ``json.dumps`` encoded (988 levels).
FEEDBACK_NESTING_LIMIT = nesting_limit(UPSTREAM_FEEDBACK_FRAME)
