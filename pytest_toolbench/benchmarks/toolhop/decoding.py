"""ToolHop's decoding presets: what upstream's ``code/evaluation_open.py`` / ``evaluation_closed.py`` send.

``closed`` is evaluation_closed.py (T=0, max_tokens=256, the API scripts); ``open`` is
evaluation_open.py (greedy, 1024 new tokens, the local-model scripts). ``--decoding`` picks one
(``open-server-parser`` decodes as ``open``), ``--temperature`` / ``--max-tokens`` override it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_toolbench.models.base import Sampling, preset_sampling

if TYPE_CHECKING:
    from pytest_toolbench.config import RunSettings

DECODING_PRESETS: dict[str, Sampling] = {
    "closed": Sampling(temperature=0.0, max_tokens=256),
    "open": Sampling(temperature=0.0, max_tokens=1024),
}


def toolhop_sampling(settings: RunSettings) -> Sampling:
    """The sampling every ToolHop request of the run sends."""
    return preset_sampling(DECODING_PRESETS, settings.resolved_decoding, settings.temperature,
                           settings.max_tokens)
