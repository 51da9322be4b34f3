"""The base of the harness's pydantic models: each builds its validator on first use.

Every pytest command in an environment with the plugin installed imports the settings, the
benchmarks' options and the session's models (results, journal, run record), and most of those
commands validate few of them: a project's own unit tests, ``--help``, an xdist worker that runs
no case of a benchmark. A no-op test command loads 26 of these models and validates 5 (the
settings and the four benchmarks' options); building each validator when its class was created
cost such a command ~115 ms when it also loaded the benchmarks' modules (42 models;
perf/README.md, twenty-third pass). With
``defer_build`` the fields are read when the class is made and the validator on the first
validation, once per process, so a model that is used costs the same and one that is not costs
little. Models use it as they would ``BaseModel``; their own ``model_config`` is merged with it.

Not deferred: the models every model call validates, in ``models/base.py``, ``models/spec.py``
and ``models/sdk_process/protocol.py``. The shared SDK process imports them while pytest starts,
on the other core; deferred, they would be built when the first request arrives, on its path.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class DeferredModel(BaseModel):
    """``BaseModel`` whose validator and serializer are built on first use (``defer_build``)."""

    model_config = ConfigDict(defer_build=True)
