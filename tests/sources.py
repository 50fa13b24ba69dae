"""Loading a Python file of the repository that is no importable module (a filter plugin, a
script of the cluster harness) under a name of the tests' own, so unit tests can call it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load(path: Path, name: str) -> ModuleType:
    """The module in ``path``, executed once, named ``<name>_under_test``."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
