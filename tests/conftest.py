"""Test-suite settings: real-server tests share one xdist worker so two vLLM servers never
compete for the two CPU cores (run with --dist loadgroup, as `make test` does)."""

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.xdist_group("real-vllm"))
