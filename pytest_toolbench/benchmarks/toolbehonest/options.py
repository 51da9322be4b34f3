"""ToolBeHonest run options. Every default is the upstream behaviour; each deviation is named.

Each field is also a command-line flag (``--toolbehonest-<field>``), derived by
:mod:`pytest_toolbench.benchmarks.options`; the description is the flag's help.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pytest_toolbench.benchmarks.declaration import Declaration
from pytest_toolbench.deferred_model import DeferredModel
from pytest_toolbench.environments import DEFAULT_EMBEDDER


class ToolBeHonestOptions(DeferredModel):
    lang: Literal["en", "zh"] = Field(
        "en", description="prompt language and data file test_<lang>.json (upstream: en)"
    )
    #: Upstream ``utils/evaluation_func.py`` ``calculate_type``: "hard" (paper Eq. 1, every paper
    #: number) or "soft" (in-order subsequence).
    progress_rate: Literal["hard", "soft"] = Field(
        "hard",
        description="L2/L3 progress rate: hard = up to the first mismatch (upstream default, "
        "paper numbers); soft = in-order subsequence (upstream --calculate_type soft)",
    )
    #: Upstream ``utils/generation_func.py`` sends max_tokens 1024 (and top_p 0.95) to vLLM and 2048
    #: to OpenAI.
    max_tokens: int | None = Field(
        None, ge=1,
        description="max_tokens per request (default: upstream's, 1024 for vLLM with "
        "top_p 0.95, 2048 for OpenAI)",
    )
    #: Upstream ``utils/evaluation_func.py`` encodes with all-MiniLM-L6-v2, the paper's Table 2
    #: embedder; another one is NOT upstream.
    embedder: str = Field(
        DEFAULT_EMBEDDER,
        description="sentence-transformers model for the L3 matching score",
    )
    #: An unsolvable gold plan with no UnsolvableQuery step has no MS (upstream
    #: ``utils/evaluation_func.py`` scores ``""``, and ``utils/calculate_metrics.py``'s np.mean of
    #: no scores is nan, which the scenario MS and the Overall then carry). "skip" is the fix:
    #: leave that record out of MS and the Overall.
    empty_ms: Literal["nan", "skip"] = Field(
        "nan",
        description="L3 matching score of an unsolvable gold plan without an UnsolvableQuery "
        "step: nan = upstream (the scenario's L3-MS and the Overall become nan); skip = leave "
        "the record out of L3-MS and the Overall",
    )


#: What pytest reads of ToolBeHonest in every command (benchmarks/declaration.py); the benchmark
#: class takes these attributes from here.
DECLARATION = Declaration(
    name="toolbehonest", title="ToolBeHonest", options_model=ToolBeHonestOptions,
    label_markers={"level": "n", "subtask": "name", "solvable": "value"},
)
