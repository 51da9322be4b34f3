"""Meta-Bench (Qin et al., "Meta-Tool", ACL 2025): open-world function calling through meta_tool.

What is from the paper, and what is inferred (Qin et al., "Meta-Tool", ACL 2025; no official
evaluation code or data exists, so the paper is the reference and each gap an inferred reading):

* **Verbatim from the paper**: the Figure 10 instruction, META_TOOL (Fig 4), TOOLSEARCHER (Fig 5),
  GET_USER_INPUT (Fig 6) (prompts.py); Algorithm 1 with alpha = 0.5 (retriever.py); the metric
  definitions T-Acc, P-Acc, IRR, FMD, HR@1/3/5; the 1,000-tool pool; the scenario axes.
* **Fixed by a sentence of the paper, the other reading an option** (suites/metabench/
  README.md quotes each sentence): a tool call is a real invocation, never JSON shown in prose or
  a code fence (``call_reading``, parsing.py); P-Acc compares arguments "in value", 72.0 == 72
  (``p_acc``); FMD is the success rate of meta_tool calling per meta_tool turn (``fmd_unit``);
  HR@k is a hit "within the retrieved tool set", the union of the turn's top-k lists
  (``hr_matching``).
* **Inferred, one option each** (options.py, defaults = this project's reading): the record layout
  (fields.py, the one module to adapt for the real files); turn-level teacher forcing with gold
  history (runner.py); units (T/P-Acc per gold call, IRR per chat turn, HR per gold missing
  tool); order-insensitive call matching, extra predicted calls not penalised (``extra_calls``),
  meta_tool counted as an invocation in IRR; E5 prefixes, names not embedded (``embed_names``),
  a required parameter with no description embedded by its name (``param_fallback``), the
  empty-parameter policy, ties by pool order (``ties``); how pools are sampled (seeded per dialogue) and filled (bundled
  distractors when the benchmark has too few tools); the keyword baseline's texts
  (``keyword_text``, default ``{name}: {description}``) and ToolSearcher result shape; the
  dialogue-history baseline's query (full history); how past turns are sent (JSON text, tool
  role) and where get_user_input appears (never listed; a call to it is abstention); the ten
  scenarios (closed-world calls are single_tool_call in simple, multi_tool_call in hard).
* **Harness decisions**: a context-window overflow is a reply with no content (wrong in chat);
  calls written in the reply text are the expected answer format, not parse failures; a case
  passes when its turn is fully right (all gold calls with matching arguments, abstention, or
  detection at meta_tool turns), while HR@k, a property of the retriever, only enters metrics.
* **Embedder**: the paper's ``intfloat/multilingual-e5-large`` is selectable
  (``--metabench-embedder``: a local folder, or a hub name loaded from the hub cache only unless
  ``HF_HUB_OFFLINE=0``; without a copy the run stops at once with one line, exit 4); the offline
  default is ``all-MiniLM-L6-v2``, so HR@k will not match the paper's digits. Library and query
  embeddings are cached on disk (keyed by embedder identity and texts), so a repeated run loads
  no model.
* **Sample realism**: the bundled library holds hand-written near-duplicates of the gold tools
  (distractors.py), and the gold meta_tool queries are paraphrases, so the alpha ablation moves
  Table 3 (tests/test_metabench_retrieval.py states the measured figures).

Layers: schema/fields (data) -> prompts/conversation (request) -> parsing/scoring (judging) ->
pool/retriever (meta_tool environment) -> runner -> tables (paper Tables 2 and 3) -> benchmark.
"""
