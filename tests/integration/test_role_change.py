"""A change made in role files alone reaches the cluster, with no Python change.

The operator's behaviour is `watches.yaml` + `roles/` + `playbooks/`. The test copies
those into a temporary directory, edits the mysql role there the way an ops team would
(an existing default, plus two new tunables in defaults/main.yml used by the Deployment
template and declared in meta/argument_specs.yml), runs the unchanged operator code with
`WATCHES_FILE=<copy>/watches.yaml`, and checks that the Deployment in the cluster
carries the change.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import harness
from tests.integration import operator_harness as oh

REPO = Path(__file__).resolve().parents[2]

# The change: a team label and resource limits on the server, a stricter pull policy.
LABELS = {"example.com/team": "databases"}
RESOURCES = {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
PULL_POLICY = "Never"  # the local cluster's images are on the node already


@pytest.fixture
def rolechange_namespace(cluster: harness.Cluster) -> Iterator[str]:
    name = cluster.create_namespace(f"rolechange-{uuid.uuid4().hex[:8]}")
    yield name
    # The operator is stopped by now: drop the finalizers it left, then remove the
    # namespace and what the role keeps outside it (volumes and their node directories).
    listed = cluster.kubectl("-n", name, "get", "mysqls.otus.homework", "-o", "name", check=False).stdout.split()
    for obj in listed:
        cluster.kubectl("-n", name, "patch", obj, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
    oh.remove_namespace(cluster, name)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) >= 1, f"{path} no longer contains {old!r}: update this test's edit"
    path.write_text(text.replace(old, new))


def changed_copy(target: Path) -> Path:
    """Copy the operator's Ansible content to `target` and change the mysql role there."""
    shutil.copy2(REPO / "watches.yaml", target / "watches.yaml")
    shutil.copytree(REPO / "roles", target / "roles", symlinks=True)
    shutil.copytree(REPO / "playbooks", target / "playbooks", symlinks=True)  # playbooks/roles -> ../roles
    role = target / "roles" / "mysql"

    # 1. An existing tunable: change its default.
    _edit(role / "defaults" / "main.yml", "mysql_image_pull_policy: IfNotPresent",
          f"mysql_image_pull_policy: {PULL_POLICY}")

    # 2. New tunables: a default each, declared in the argument specs, used by the template.
    with (role / "defaults" / "main.yml").open("a") as defaults:
        defaults.write(
            "\n# Extra labels of the server Deployment and its pods (added by the ops team).\n"
            f"mysql_deployment_labels: {yaml.safe_dump(LABELS, default_flow_style=True).strip()}\n"
            "\n# Resources of the server container (added by the ops team).\n"
            f"mysql_resources: {yaml.safe_dump(RESOURCES, default_flow_style=True).strip()}\n")
    specs_path = role / "meta" / "argument_specs.yml"
    specs = yaml.safe_load(specs_path.read_text())
    specs["argument_specs"]["main"]["options"].update({
        "mysql_deployment_labels": {"type": "dict", "default": LABELS,
                                    "description": "Extra labels of the server Deployment and its pods."},
        "mysql_resources": {"type": "dict", "default": RESOURCES,
                            "description": "Resources of the server container."},
    })
    specs_path.write_text("---\n" + yaml.safe_dump(specs, sort_keys=False))
    template = role / "templates" / "deployment.yaml.j2"
    _edit(template, "labels: {{ mysql_labels | to_json }}",
          "labels: {{ mysql_labels | combine(mysql_deployment_labels) | to_json }}")
    _edit(template, "labels: {{ raw.podLabels | default({}, true) | combine(mysql_pod_labels) | to_json }}",
          "labels: {{ mysql_pod_labels | combine(mysql_deployment_labels) | to_json }}")
    _edit(template, "          resources: {{ raw.resources | default(mysql_default_resources, true) | to_json }}\n",
          "          resources: {{ mysql_resources | to_json }}\n")
    return target / "watches.yaml"


def test_role_only_change_reaches_the_deployment(cluster: harness.Cluster, rolechange_namespace: str,
                                                 tmp_path: Path) -> None:
    ns, name = rolechange_namespace, "changed"
    copy = tmp_path / "operator-content"
    copy.mkdir()
    watches = changed_copy(copy)
    assert "mysql_deployment_labels" not in (REPO / "roles/mysql/defaults/main.yml").read_text()

    oh.install_crd(cluster)
    workdir = tmp_path / "operator"
    workdir.mkdir()
    operator = oh.start_operator(cluster, ns, workdir, watches=watches)
    try:
        cluster.apply(oh.mysql_object(name, ns))
        oh.wait_successful(cluster, ns, name, operator)
        cluster.kubectl("-n", ns, "rollout", "status", f"deployment/{name}", "--timeout=300s", timeout=320)

        assert f"with role {copy / 'roles' / 'mysql'}" in operator.log(), "the operator did not use the copy's role"
        deployment = cluster.get("-n", ns, "deployment", name)
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert deployment["metadata"]["labels"].items() >= LABELS.items(), deployment["metadata"]["labels"]
        assert deployment["spec"]["template"]["metadata"]["labels"].items() >= LABELS.items()
        assert container["resources"] == RESOURCES, container["resources"]
        assert container["imagePullPolicy"] == PULL_POLICY
        # The server came up under the new limits; the selector did not change.
        assert deployment["status"].get("readyReplicas") == 1, deployment["status"]
        assert deployment["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/name": "mysql", "app.kubernetes.io/instance": name}
    except BaseException:
        print(oh.diagnostics(cluster, ns, operator))
        raise
    finally:
        operator.stop()
