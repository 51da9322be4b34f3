"""The benchmarks' real data: where each file lives upstream, the revision it is pinned to, its
sha256 and record count (``registry.py``), and how it is fetched into the Hugging Face cache,
verified and laid out for the loaders (``fetch.py``, ``resolve.py``); ``toolbench data``
(``cli.py``). Hugging Face files go through ``huggingface_hub``; files on other hosts through one
small downloader (``download.py``) into the same cache root.
"""
