"""Watches the Operator SDK's users rely on: a core kind (group "") whose role runs
for a labelled ConfigMap, and only for one that matches the selector (matchLabels and
matchExpressions); and a Secret watch whose role is a collection's, named by its FQCN, whose
task calls its collection's own module by its short name.

A core kind's objects live at `/api/v1/...`, not at the custom-objects API's
`/apis/<group>/<version>/...` (which answers 404 for group ""); a shim reading them there
would take every object for gone and run nothing. The role here (written to tmp_path) records each run in a ConfigMap
`<name>-seen` holding the name and a value of the watched one, read by the role from
`ansible_operator_meta` and `__configmap` (the SDK's `_<group>_<kind>` with the empty group).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import harness
from tests.integration import operator_harness as oh

LABEL = "otus.homework/core-kind-test"
STAGE = "otus.homework/stage"
ROLE = oh.seen_role({"source": "{{ ansible_operator_meta.name }}",
                     "colour": "{{ __configmap.data.colour | default('none') }}"})


COLLECTION_ROLE = textwrap.dedent("""\
    ---
    - name: Call the collection's own module by its short name
      shade:
        text: "{{ ansible_operator_meta.name }}"
      register: shaded

    - name: Record the run
      kubernetes.core.k8s:
        state: present
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: "{{ ansible_operator_meta.name }}-seen-by-collection"
            namespace: "{{ ansible_operator_meta.namespace }}"
          data:
            shade: "{{ shaded.shade }}"
    """)
COLLECTION_MODULE = textwrap.dedent("""\
    # A module of the test's collection: upper-cases its text.
    from ansible.module_utils.basic import AnsibleModule


    def main():
        module = AnsibleModule(argument_spec={"text": {"type": "str", "required": True}})
        module.exit_json(changed=False, shade=module.params["text"].upper())


    if __name__ == "__main__":
        main()
    """)


def collection(root: Path) -> Path:
    """The collection otus_test.fixtures under `root` (an ANSIBLE_COLLECTIONS_PATH entry)."""
    base = root / "ansible_collections" / "otus_test" / "fixtures"
    (base / "roles" / "seen" / "tasks").mkdir(parents=True)
    (base / "plugins" / "modules").mkdir(parents=True)
    (base / "galaxy.yml").write_text("namespace: otus_test\nname: fixtures\nversion: 1.0.0\n")
    (base / "roles" / "seen" / "tasks" / "main.yml").write_text(COLLECTION_ROLE)
    (base / "plugins" / "modules" / "shade.py").write_text(COLLECTION_MODULE)
    return root


@pytest.fixture(scope="module")
def core_namespace(cluster: harness.Cluster) -> Iterator[str]:
    with oh.module_namespace(cluster, "core") as name:
        yield name


def test_a_core_kind_watch_runs_its_role_for_the_selected_objects(
        cluster: harness.Cluster, core_namespace: str, tmp_path: Path) -> None:
    ns = core_namespace
    watches = oh.role_watches(tmp_path, [{
        "version": "v1", "group": "", "kind": "ConfigMap", "role": "seen",
        "selector": {"matchLabels": {LABEL: "watched"},
                     "matchExpressions": [{"key": STAGE, "operator": "NotIn", "values": ["draft"]}]},
        "reconcilePeriod": "0s",
    }, {
        "version": "v1", "group": "", "kind": "Secret", "role": "otus_test.fixtures.seen",
        "selector": {"matchLabels": {LABEL: "watched"}}, "reconcilePeriod": "0s",
        "watchAnnotationsChanges": True,
    }], {"seen": ROLE})
    collections = collection(tmp_path / "collections")
    operator = oh.start_operator(cluster, ns, tmp_path / "operator", watches=watches,
                                 extra_env={"ANSIBLE_COLLECTIONS_PATH": str(collections)})
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
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                  "metadata": {"name": "token", "namespace": ns, "labels": {LABEL: "watched"}},
                                  "stringData": {"k": "v"}}))
        cluster.wait_for(lambda: cluster.kubectl("-n", ns, "get", "configmap", "token-seen-by-collection",
                                                 check=False).returncode == 0,
                         timeout=120, what="the collection's role to run for the Secret", interval=1)
        assert cluster.get("-n", ns, "configmap", "token-seen-by-collection")["data"] == {"shade": "TOKEN"}
        # the runs of picked, late and the token each log their summary after the write
        # seen above: wait for all three
        cluster.wait_for(lambda: {"picked", "late", "token"} <= {s.name for s in operator.summaries()},
                         timeout=60, what="the runs of picked, late and the Secret to end", interval=0.5)
        assert any(s.name == "picked" and s.status == "successful" for s in operator.summaries())
        assert sorted(s.name for s in operator.summaries()) == ["late", "picked", "token"], \
            "a run the selector excludes"
        for excluded in ("ignored", "draft"):
            assert cluster.kubectl("-n", ns, "get", "configmap", f"{excluded}-seen", check=False).returncode != 0
        # a change of the watched object's data (a kind without spec) runs the role again, as
        # in the SDK; a label change alone does not
        cluster.kubectl("-n", ns, "label", "configmap", "picked", "extra=1")
        patched = harness.now_utc()
        cluster.kubectl("-n", ns, "patch", "configmap", "picked", "--type=merge",
                        "-p", json.dumps({"data": {"colour": "picked-green"}}))
        cluster.wait_for(lambda: cluster.get("-n", ns, "configmap", "picked-seen")["data"]["colour"]
                         == "picked-green", timeout=120, what="the role to run for the data change", interval=1)

        def settled() -> bool:
            """Runs of picked: its create, its data change, and those its own child's changes
            asked for (the role rewrites picked-seen), every one ended; none for the label.
            (The data change's run writes picked-seen before it ends and logs its summary.)"""
            runs = [s for s in operator.summaries() if s.name == "picked"]
            requeued = operator.log().count(f"ConfigMap {ns}/picked: an object it owns changed")
            return (len(runs) == 2 + requeued
                    and runs[-1].finished_at > patched)

        cluster.wait_for(settled, timeout=60, interval=1,
                         what="the runs of picked to be its create's, its data change's and those its "
                              "child asked for, not one more (the label change ran the role)")
        # watchAnnotationsChanges (the Secret's entry): an annotation alone runs its role again
        runs_of_token = sum(s.name == "token" for s in operator.summaries())
        cluster.kubectl("-n", ns, "annotate", "secret", "token", "otus.homework/touched=1")
        cluster.wait_for(lambda: sum(s.name == "token" for s in operator.summaries()) > runs_of_token,
                         timeout=120, what="the Secret's role to run for an annotation", interval=1)
    finally:
        operator.stop()
