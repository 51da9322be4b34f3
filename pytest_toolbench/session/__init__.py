"""The pytest side of a run, behind the hook entry points of ``plugin.py``; fixtures use the names
exported here.

``state``: the run's state in a pytest process; ``selection``: which cases run and how they are
parametrised; ``run_start``: settings, checks and the run's start; ``sdk``: the shared SDK
process, decided at configure; ``transport``: results from the workers' reports to the
controller; ``controller``: the hooks of the process that sees every report; ``completeness``:
which selected cases reported; ``finish``: the run's end as one record, without pytest;
``outputs``: the record as the terminal shows it; ``identity``: run id, command line, checksums;
``signals``: SIGTERM and SIGHUP as Ctrl-C; ``gc_tuning``: collected items kept out of the GC's way.
"""

from pytest_toolbench.session.sdk import sdk_address
from pytest_toolbench.session.state import record_sandbox_state, run_dir, state
from pytest_toolbench.session.transport import RESULT_KEY

__all__ = ["RESULT_KEY", "record_sandbox_state", "run_dir", "sdk_address", "state"]
