"""
Filters of the bench role: the mysql role's ``k8s_in_sync`` and ``k8s_out_of_sync``
(roles/mysql_common/filter_plugins/mysql_k8s.py) under bench names, loaded by path (not
copied), so the bench measures the same checks.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

_SOURCE = Path(__file__).resolve().parents[4] / "roles/mysql_common/filter_plugins/mysql_k8s.py"
_SPEC = importlib.util.spec_from_file_location("bench_mysql_k8s", _SOURCE)
if _SPEC is None or _SPEC.loader is None:
    raise ImportError(f"cannot load the mysql role's filters from {_SOURCE}")
mysql_k8s = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(mysql_k8s)


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "bench_k8s_in_sync": mysql_k8s.k8s_in_sync,
            "bench_k8s_out_of_sync": mysql_k8s.k8s_out_of_sync,
        }
