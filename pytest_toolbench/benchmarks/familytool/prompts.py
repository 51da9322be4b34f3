"""The KG-extraction prompt (upstream ``pipeline/KG_extraction.py``), byte-exact, and its message layouts per model kind.

Upstream renders the relation list from a Python ``set`` (order depends on PYTHONHASHSEED); the
order here is a documented option (``KnowledgeGraph.relations``: sorted by default, as in the
shared example prompt for record 0 of -b). Note the template's example 2 uses the relation
``child``, which no KG has (upstream's own text, kept).
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

#: Byte-exact upstream instruction; ``{sample_kg_str}`` is the only placeholder (str.replace,
#: since the text has other braces-free content but we never rely on str.format).
EXTRACTION_TEMPLATE = (
    '\n'
    'You are a helpful AI assistant, and you will assist me in analyzing the Query. When encountering ambiguous intents or things, you need to use the "KG.search" python function to retrieve relevant information from the knowledge graph.\n'
    '\n'
    'def KG.search(start: str, path: List[str]) -> List[Tuple[str, str, str]]:\n'
    '    """Search the knowledge graph for user relationships, locations, preferences, and other relevant information.  \n'
    '\n'
    '    This API supports multi-hop queries to discover relationship links between users, as well as associations between users and locations or preferences.  \n'
    '\n'
    '    **Args:**  \n'
    '    - **start**: The starting point of the knowledge graph query. If related to personal relationships, the speaker in `<speak></speak>` tags can be referenced.  \n'
    '    - **path**: The reasoning path in the knowledge graph, where each element must be a predefined relation type. Only use relations from **Valid Relations**.  \n'
    '\n'
    '    **Returns:**  \n'
    '    - **List[Tuple[str, str, str]]**: A list of triples containing the complete relationship paths.\n'
    '        \n'
    '    Valid Relations :\n'
    '    {sample_kg_str}\n'
    '       \n'
    '        \n'
    '    Notes:\n'
    '\n'
    '    All relations must come from the predefined list, including the content within <> (which should also be generated).\n'
    '\n'
    '    Each hop in the query path must be a valid relation.\n'
    '\n'
    '    The returned results will include the complete relationship path.\n'
    '\n'
    '    Fabricating non-existent relations is prohibited.\n'
    '    """\n'
    '    pass\n'
    '\n'
    '\n'
    'Below are some examples for reference:\n'
    'example 1: \n'
    "User query: <speak>Speaker: Bob</speak> I'd like to cancel alarms during my dad's preferred dining time. \n"
    '\n'
    'Output:\n'
    '\n'
    '```python \n'
    'KG.search(start="Bob", path=["<relationship>father","<relationship>prefer_dinnertime"])\n'
    '```\n'
    '\n'
    'example 2: \n'
    "User query: <speak>Speaker: Alice</speak> I'd like to book a train ticket from son's preferred city to husband's preferred city.\n"
    '\n'
    'Output:\n'
    '\n'
    '```python\n'
    'KG.search(start="Alice", path=["<relationship>child","<relationship>prefer_city"])\n'
    'KG.search(start="Alice", path=["<relationship>husband","<relationship>prefer_city"])\n'
    '```\n'
    '\n'
    'Please strictly follow the example format for completion generation, and do not generate any additional content.\n'
)

RELATION_ITEM = "- <relationship>{}"
RELATION_SEPARATOR = "   "

#: Upstream sampling for extraction (``pipeline/KG_extraction.py``): local models also use repetition_penalty=1.05,
#: which the OpenAI-compatible wire format cannot carry without extra_body (recorded as deviation).
EXTRACTION_TEMPERATURE = 0.7
EXTRACTION_MAX_TOKENS = 4096

MessageLayout = Literal["single_user", "system_user"]


def relation_list(relations: Sequence[str]) -> str:
    """All relations on one line, three spaces apart (``"   ".join``)."""
    return RELATION_SEPARATOR.join(RELATION_ITEM.format(r) for r in relations)


def extraction_instruction(relations: Sequence[str]) -> str:
    return EXTRACTION_TEMPLATE.replace("{sample_kg_str}", relation_list(relations))


def extraction_messages(
    query: str, relations: Sequence[str], layout: MessageLayout
) -> list[dict[str, Any]]:
    """``single_user``: local vLLM models get ONE user turn ``instruction + "\\n" + query``;
    ``system_user``: API models get ``[system: instruction, user: query]`` (``pipeline/KG_extraction.py``)."""
    instruction = extraction_instruction(relations)
    if layout == "single_user":
        return [{"role": "user", "content": instruction + "\n" + query}]
    return [{"role": "system", "content": instruction}, {"role": "user", "content": query}]
