"""A watch on a core kind (group "", issue 13's first defect): the role runs for a labelled
ConfigMap, and only for one that matches the selector (matchLabels and matchExpressions).

Before, the shim read the watched object through the custom-objects API at
`/apis//v1/...`, got 404, took the object for gone and ran nothing, while kopf logged the
handler as succeeded. The role here (written to tmp_path) records each run in a ConfigMap
`<name>-seen` holding the name and a value of the watched one, read by the role from
`ansible_operator_meta` and `__configmap` (the SDK's `_<group>_<kind>` with the empty group).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import harness
from tests.integration import operator_harness as oh

LABEL = "otus.homework/core-kind-test"
STAGE = "otus.homework/stage"
ROLE = textwrap.dedent("""\
    ---
    - name: Record the run in a ConfigMap beside the watched one
      kubernetes.core.k8s:
        state: present
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: "{{ ansible_operator_meta.name }}-seen"
            namespace: "{{ ansible_operator_meta.namespace }}"
          data:
            source: "{{ ansible_operator_meta.name }}"
            colour: "{{ __configmap.data.colour | default('none') }}"
    """)


@pytest.fixture(scope="module")
def core_namespace(cluster: harness.Cluster) -> Iterator[str]:
    with oh.module_namespace(cluster, "core") as name:
        yield name


def test_a_core_kind_watch_runs_its_role_for_the_selected_objects(
        cluster: harness.Cluster, core_namespace: str, tmp_path: Path) -> None:
    ns = core_namespace
    tasks = tmp_path / "roles" / "seen" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(ROLE)
    watches = tmp_path / "watches.yaml"
    watches.write_text(yaml.safe_dump([{
        "version": "v1", "group": "", "kind": "ConfigMap", "role": str(tmp_path / "roles" / "seen"),
        "selector": {"matchLabels": {LABEL: "watched"},
                     "matchExpressions": [{"key": STAGE, "operator": "NotIn", "values": ["draft"]}]},
        "reconcilePeriod": "0s",
    }]))
    operator = oh.start_operator(cluster, ns, tmp_path / "operator", watches=watches)
    try:
        for name, labels in (("picked", {LABEL: "watched", STAGE: "final"}), ("ignored", {}),
                             ("draft", {LABEL: "watched", STAGE: "draft"})):
            cluster.apply(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                      "metadata": {"name": name, "namespace": ns, "labels": labels},
                                      "data": {"colour": f"{name}-blue"}}))

        def seen(name: str) -> bool:
            if not operator.alive():
                raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
            return cluster.kubectl("-n", ns, "get", "configmap", f"{name}-seen", check=False).returncode == 0

        cluster.wait_for(lambda: seen("picked"), timeout=120, what="the role to run for the labelled ConfigMap",
                         interval=1)
        # One more selected object, created after the others: once its run is done, a run for
        # an excluded one that had been queued before it would have been done too.
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "late", "namespace": ns, "labels": {LABEL: "watched"}}}))
        cluster.wait_for(lambda: seen("late"), timeout=120, what="the role to run for the late ConfigMap", interval=1)
        assert cluster.get("-n", ns, "configmap", "picked-seen")["data"] == {"source": "picked",
                                                                              "colour": "picked-blue"}
        assert any(s.name == "picked" and s.status == "successful" for s in operator.summaries())
        assert [s.name for s in operator.summaries()] == ["picked", "late"], "a run the selector excludes"
        for excluded in ("ignored", "draft"):
            assert cluster.kubectl("-n", ns, "get", "configmap", f"{excluded}-seen", check=False).returncode != 0
    finally:
        operator.stop()
