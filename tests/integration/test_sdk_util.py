"""operator_sdk.util under this operator, against the real cluster: a role
written for the Operator SDK calls `operator_sdk.util.k8s_status`,
`operator_sdk.util.requeue_after` and `operator_sdk.util.osdk_metric` by those names, and
they do what the SDK's runtime makes of them.

The kind is a small CRD of the test's own (`Widget`, with the status subresource); its
entry has no reconcilePeriod and there are no children, so only `requeue_after` can start
a run that no event asked for.
- k8s_status: the status gets the role's field and its custom condition (type `Painted`,
  a lastTransitionTime set), beside the operator's own `Successful` condition; a second
  run with the same values writes nothing (`changed: false`).
- requeue_after (2 s): the role runs again and again with no change to anything, each
  run logged as requeued; once the spec stops asking, the runs stop (the next spec change
  is the last run).
- osdk_metric: the counter the role increments at every run is served at /metrics
  (METRICS_BIND_ADDRESS) with the number of successful runs, beside the operator's own
  reconcile counter and histogram for the kind.
- reconcilePeriod, which works like requeue_after after every successful run (as in the
  SDK): an object deleted while such a run is in flight is finalized once, after it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import harness
from tests.integration import operator_harness as oh

GROUP = "sdkutil.otus.test"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}
ROLE = textwrap.dedent("""\
    ---
    - name: Report the colour in the status, with a condition of the role's own
      operator_sdk.util.k8s_status:
        api_version: sdkutil.otus.test/v1
        kind: Widget
        name: "{{ ansible_operator_meta.name }}"
        namespace: "{{ ansible_operator_meta.namespace }}"
        status:
          painted: "{{ colour }}"
        conditions:
          - type: Painted
            status: "True"
            reason: ColourApplied
            message: "painted {{ colour }}"
      register: painted

    - name: Keep what the status write did, for the test to read
      kubernetes.core.k8s:
        state: present
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: "{{ ansible_operator_meta.name }}-status-write"
            namespace: "{{ ansible_operator_meta.namespace }}"
          data:
            changed: "{{ painted.changed | string }}"

    - name: Count the paint jobs
      operator_sdk.util.osdk_metric:
        name: widget_paint_jobs
        description: Paint jobs done by the widget role
        counter:
          increment: true

    - name: Look again soon
      operator_sdk.util.requeue_after:
        time: 2s
      when: requeue | bool
    """)


@pytest.fixture(scope="module")
def namespace(cluster: harness.Cluster) -> Iterator[str]:
    with oh.module_namespace(cluster, "sdkutil") as name:
        yield name


def widget(ns: str, *, colour: str, requeue: bool) -> str:
    return json.dumps({"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                       "metadata": {"name": "w", "namespace": ns},
                       "spec": {"colour": colour, "requeue": requeue}})


def test_k8s_status_and_requeue_after_work_under_their_sdk_names(
        cluster: harness.Cluster, namespace: str, tmp_path: Path) -> None:
    ns = namespace
    cluster.apply(json.dumps(CRD))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/widgets.{GROUP}", "--timeout=60s")
    watches = oh.role_watches(tmp_path, [{"version": "v1", "group": GROUP, "kind": "Widget", "role": "widget"}],
                              {"widget": ROLE})
    with socket.socket() as probe:  # a free port for /metrics
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    operator = oh.start_operator(cluster, ns, tmp_path / "operator", watches=watches,
                                 extra_env={"METRICS_BIND_ADDRESS": f"127.0.0.1:{port}"})

    def scrape() -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2])
                for line in text.splitlines() if line and not line.startswith("#")}

    def status() -> dict[str, Any]:
        if not operator.alive():
            raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
        return cluster.get("-n", ns, "widgets." + GROUP, "w").get("status") or {}

    def runs() -> int:
        return sum(1 for s in operator.summaries() if s.name == "w" and s.status == "successful")

    try:
        cluster.apply(widget(ns, colour="green", requeue=True))
        cluster.wait_for(lambda: status().get("painted") == "green" and runs() >= 1, timeout=120,
                         what="the role to write the status")
        conditions = {c["type"]: c for c in status().get("conditions") or []}
        assert conditions["Painted"]["status"] == "True"
        assert conditions["Painted"]["reason"] == "ColourApplied"
        assert conditions["Painted"]["message"] == "painted green"
        assert conditions["Painted"].get("lastTransitionTime")

        # requeue_after: more runs, with nothing changed by anyone
        cluster.wait_for(lambda: runs() >= 4, timeout=120, what="runs requeued by requeue_after")
        assert "Widget " + ns + "/w: requeued by its last run (requeue_after)" in operator.log()
        write = cluster.get("-n", ns, "configmap", "w-status-write")["data"]
        assert write == {"changed": "False"}, "a status already holding the values was written again"
        conditions = {c["type"]: c for c in status().get("conditions") or []}
        assert conditions.get("Successful", {}).get("status") == "True", conditions

        # osdk_metric: one increment per successful run, read after the runs settle below
        gvk = f'{GROUP}/v1/Widget'
        values = scrape()
        assert values.get("widget_paint_jobs", 0) >= 4, values
        assert values.get(f'ansible_operator_reconcile_total{{GVK="{gvk}",result="succeeded"}}', 0) >= 4
        assert f'ansible_operator_reconciles_count{{GVK="{gvk}",result="succeeded"}}' in values

        # asking no more: the spec change runs once more, and no run is requeued after it
        cluster.apply(widget(ns, colour="blue", requeue=False))
        cluster.wait_for(lambda: status().get("painted") == "blue", timeout=120,
                         what="the colour change to be reported")
        assert {c["type"]: c for c in status()["conditions"]}["Painted"]["message"] == "painted blue"

        def counted() -> bool:
            """The colour change's run has ended (the status reports its generation Successful,
            written after its summary and its metric; the colour above is written mid-run),
            and the counter equals the successful runs."""
            ended = harness.is_successful(cluster.get("-n", ns, "widgets." + GROUP, "w"))
            return ended and scrape().get("widget_paint_jobs") == float(runs())

        cluster.wait_for(counted, timeout=60,
                         what="the colour change's run to end and the counter to equal the successful runs")
    finally:
        operator.stop()


INVENTORY_ROLE = textwrap.dedent("""\
    ---
    - name: Write what the inventory's group_vars hold, one of them vaulted
      kubernetes.core.k8s:
        state: present
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: "{{ ansible_operator_meta.name }}-inventory"
            namespace: "{{ ansible_operator_meta.namespace }}"
          data:
            greeting: "{{ greeting }}"
            vaulted: "{{ vaulted_word | length | string }} characters"
    """)


def test_inventory_group_vars_and_an_ansible_args_vault_file(
        cluster: harness.Cluster, namespace: str, tmp_path: Path) -> None:
    """ANSIBLE_INVENTORY (a directory with group_vars, as in the SDK's image) is honoured,
    and `--ansible-args '--vault-password-file <file>'` lets a run read a vaulted variable;
    the role writes the plain one and only the vaulted one's length. The object also carries
    the SDK's per-object annotations (verbosity, max-runner-artifacts, reconcile-period); a
    second object without them runs at its kind's ANSIBLE_VERBOSITY_CONFIGMAP_ (the SDK's
    per-kind variable, which the annotation overrides)."""
    ns = namespace
    group_vars = tmp_path / "inventory" / "group_vars" / "all"
    group_vars.mkdir(parents=True)
    (tmp_path / "inventory" / "hosts.yml").write_text("all:\n  hosts:\n    localhost: {}\n")
    (group_vars / "plain.yml").write_text("greeting: hello from group_vars\n")
    (group_vars / "vault.yml").write_text("vaulted_word: sesame-42\n")
    password = tmp_path / "vault-password"
    password.write_text("test-vault-password\n")
    subprocess.run([str(Path(sys.executable).parent / "ansible-vault"), "encrypt",
                    "--vault-password-file", str(password), str(group_vars / "vault.yml")],
                   check=True, capture_output=True, timeout=120)
    assert "sesame-42" not in (group_vars / "vault.yml").read_text()
    watches = oh.role_watches(tmp_path, [{
        "version": "v1", "group": "", "kind": "ConfigMap", "role": "inv",
        "selector": {"matchLabels": {"otus.homework/inventory-test": "watched"}},
    }], {"inv": INVENTORY_ROLE})
    operator = oh.start_operator(cluster, ns, tmp_path / "operator", start=False,
                                 extra_env={"ANSIBLE_INVENTORY": str(tmp_path / "inventory"),
                                            "ANSIBLE_VERBOSITY_CONFIGMAP_": "1"})
    operator.command = [*operator.command, "--watches-file", str(watches),
                        "--ansible-args", f"--vault-password-file {password}"]
    operator.start()
    try:
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "inv", "namespace": ns, "labels": {"otus.homework/inventory-test": "watched"},
            "annotations": {"ansible.sdk.operatorframework.io/verbosity": "3",
                            "ansible.sdk.operatorframework.io/max-runner-artifacts": "1",
                            "ansible.sdk.operatorframework.io/reconcile-period": "2s"}}}))
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "plain", "namespace": ns, "labels": {"otus.homework/inventory-test": "watched"}}}))

        def written() -> bool:
            if not operator.alive():
                raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
            return cluster.kubectl("-n", ns, "get", "configmap", "inv-inventory", check=False).returncode == 0

        cluster.wait_for(written, timeout=120, what="the role to run with the inventory's variables")
        assert cluster.get("-n", ns, "configmap", "inv-inventory")["data"] == {
            "greeting": "hello from group_vars", "vaulted": "9 characters"}

        # the SDK's per-object annotations: a period of its own (the entry has none), one
        # artifact directory kept, and the runs at verbosity 3
        cluster.wait_for(lambda: sum(s.name == "inv" for s in operator.summaries()) >= 3, timeout=60,
                         what="runs every 2 s from the reconcile-period annotation")
        # (read once runs have ended: a run logs its task results and summary after its write)
        assert "sesame-42" not in operator.log()
        artifacts = tmp_path / "operator" / "runner" / "core" / "ConfigMap" / ns / "inv" / "artifacts"
        kept = [d for d in artifacts.iterdir() if d.is_dir()]
        assert len(kept) == 1, kept
        assert "ESTABLISH LOCAL CONNECTION" in (kept[0] / "stdout").read_text()
        # the kind's verbosity (1: each task's result shown, no connection details)
        cluster.wait_for(lambda: any(s.name == "plain" for s in operator.summaries()), timeout=60,
                         what="the run of the object without annotations")
        plain = sorted((artifacts.parent.parent / "plain" / "artifacts").iterdir())[-1]
        stdout = (plain / "stdout").read_text()
        assert "=> {" in stdout and "ESTABLISH LOCAL CONNECTION" not in stdout, stdout[-3000:]
    finally:
        operator.stop()


SLOW_ROLE = textwrap.dedent("""\
    ---
    - name: Take a while, so that the next periodic run is in flight when the test deletes
      ansible.builtin.wait_for:
        timeout: 6
      when: not (finalizing | default(false))
    """)


def test_a_reconcile_period_requeues_and_a_deletion_mid_run_finalizes_once(
        cluster: harness.Cluster, namespace: str, tmp_path: Path) -> None:
    """reconcilePeriod as in the SDK: a successful run requeues its object that long after it,
    and the run logs why it runs. A deletion while such a run is in flight waits for it, then
    runs the finalizer once (a kopf timer kept the object until the timer's run ended and
    then ran the finalizer a second time: kopf had forgotten that it succeeded)."""
    ns = namespace
    label = "otus.homework/period-test"
    watches = oh.role_watches(tmp_path, [{
        "version": "v1", "group": "", "kind": "ConfigMap", "role": "slow", "reconcilePeriod": "2s",
        "selector": {"matchLabels": {label: "watched"}},
        "finalizer": {"name": "otus.homework/period-test", "vars": {"finalizing": True}},
    }], {"slow": SLOW_ROLE})
    operator = oh.start_operator(cluster, ns, tmp_path / "operator", watches=watches)
    periodic = f"ConfigMap {ns}/slow: its reconcile period has passed since its last run"

    def runs(action: str) -> int:
        if not operator.alive():
            raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
        return sum(1 for s in operator.summaries() if s.name == "slow" and s.action == action)

    def periodic_run_in_flight() -> bool:
        started = operator.log().count(periodic)  # each logged before its run starts
        return started >= 1 and runs("reconcile") == started  # the create's run + the finished ones

    try:
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "slow", "namespace": ns, "labels": {label: "watched"}}}))
        cluster.wait_for(periodic_run_in_flight, timeout=120, what="a periodic run to be in flight", interval=0.3)
        cluster.kubectl("-n", ns, "delete", "configmap", "slow", "--wait=false")
        cluster.wait_for(lambda: cluster.kubectl("-n", ns, "get", "configmap", "slow", check=False).returncode != 0,
                         timeout=120, what="the ConfigMap to go")
        assert runs("finalize") == 1, operator.log()[-4000:]
        assert all(s.status == "successful" for s in operator.summaries() if s.name == "slow")
    finally:
        operator.stop()
