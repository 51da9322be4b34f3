"""ToolHop builds its sampling from its own presets (benchmarks/toolhop/decoding.py): upstream's
values for every decoding, backend and override; Meta-Bench keeps the values it always sent."""

from __future__ import annotations

import itertools

import pytest

from pytest_toolbench.benchmarks.toolhop.decoding import toolhop_sampling
from pytest_toolbench.config import RunSettings
from pytest_toolbench.models.base import Sampling

#: What upstream's scripts send (evaluation_closed.py / evaluation_open.py).
EXPECTED = {"closed": Sampling(temperature=0.0, max_tokens=256),
            "open": Sampling(temperature=0.0, max_tokens=1024)}


@pytest.mark.parametrize("decoding,backend,temperature,max_tokens", list(itertools.product(
    [None, "closed", "open", "open-server-parser"],
    [("gpt-4o", "openai"), ("m", "vllm"), ("oracle", "auto")],
    [None, 0.7], [None, 99])))
def test_toolhop_sampling_is_upstream_preset_with_overrides(decoding, backend, temperature, max_tokens):
    model, kind = backend
    settings = RunSettings(model=model, backend=kind, decoding=decoding, temperature=temperature,
                           max_tokens=max_tokens)
    preset = EXPECTED["closed" if settings.resolved_decoding == "closed" else "open"]
    expected = preset.model_copy(update={k: v for k, v in
                                         {"temperature": temperature, "max_tokens": max_tokens}.items()
                                         if v is not None})
    assert toolhop_sampling(settings) == expected


def test_metabench_sends_the_values_it_always_sent():
    from pytest_toolbench.benchmarks.metabench.benchmark import METABENCH_DECODING

    assert METABENCH_DECODING == EXPECTED
