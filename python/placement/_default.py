"""The process-wide default client, as a hook.

placement.client installs its default_client() here when it is imported.
Modules below it in the import order (placement._shared_region, ...) resolve
`client=None` through resolve() without importing placement.client, which
imports them: the package's import graph has no cycle (checked by
tests/python/placement/test_imports.py).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

_factory: Optional[Callable[[], Any]] = None


def install(factory: Callable[[], Any]) -> None:
    global _factory
    _factory = factory


def resolve(client: Optional[Any]) -> Any:
    """`client`, else the default client (connecting on first use)."""
    if client is not None:
        return client
    if _factory is None:  # placement.client not imported yet
        import importlib
        importlib.import_module("placement.client")
    assert _factory is not None
    return _factory()
