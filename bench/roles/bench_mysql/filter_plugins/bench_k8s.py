"""
Filters of the bench roles (bench_mysql_onecall links this file): the mysql role's
``k8s_in_sync`` (loaded from roles/mysql by path, not copied, so the bench measures the
same check) and, for the one-call variant, the objects of ``{current, desired}`` pairs
that are out of sync, ready for one ``kubernetes.core.k8s`` call.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

_SOURCE = Path(__file__).resolve().parents[4] / "roles/mysql/filter_plugins/mysql_k8s.py"
_SPEC = importlib.util.spec_from_file_location("bench_mysql_k8s", _SOURCE)
if _SPEC is None or _SPEC.loader is None:
    raise ImportError(f"cannot load the mysql role's filters from {_SOURCE}")
mysql_k8s = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(mysql_k8s)


def out_of_sync(pairs: Any) -> list[Any]:
    """The ``desired`` of every ``{current, desired}`` pair that is not in sync."""
    return [mysql_k8s._plain(p["desired"]) for p in pairs
            if not mysql_k8s.k8s_in_sync(p["current"], p["desired"])]


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "bench_k8s_in_sync": mysql_k8s.k8s_in_sync,
            "bench_k8s_out_of_sync": out_of_sync,
        }
