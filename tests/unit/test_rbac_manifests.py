"""The RBAC manifests as written (no cluster): no wildcards, and the namespaced install's
only cluster-scoped permissions. What the API server's authorizer answers is checked in
tests/integration/test_rbac.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", ["deploy/rbac/cluster_role.yaml",
                                  "deploy/namespaced/role.yaml",
                                  "deploy/namespaced/cluster_role.yaml",
                                  "deploy/operator/leader_election_role.yaml"])
def test_rules_name_every_verb_and_resource(path: str) -> None:
    """No wildcards: every permission is spelled out (and so reviewed)."""
    role = yaml.safe_load((REPO / path).read_text())
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
        assert "nonResourceURLs" not in rule, rule


def test_namespaced_install_has_no_cluster_rule_but_volumes() -> None:
    role = yaml.safe_load((REPO / "deploy/namespaced/cluster_role.yaml").read_text())
    resources = {(g, r) for rule in role["rules"] for g in rule["apiGroups"]
                 for r in rule["resources"]}
    assert resources == {("", "persistentvolumes"), ("storage.k8s.io", "storageclasses")}
