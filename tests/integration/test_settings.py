"""The production settings of the MySQL kind on a real cluster and real servers: resources,
scheduling, the Service, pod labels and annotations, the mysqld-exporter sidecar, and server
options (spec.config), applied to the running server or by a restart as each option needs.

Like test_operator.py: an operator process watching one namespace made for this module, and
every test run for each server image at once (`oh.for_each_server`), sharing both.
"""

from __future__ import annotations

import json

import pytest

from tests import harness
from tests.integration import operator_harness as oh

NAMESPACE_PREFIX = "settings"  # its namespaces: settings-<random>


def variables(cluster: harness.Cluster, ns: str, name: str, *names: str) -> dict[str, str]:
    """Global variables of the running server, read as the seed walkthrough reads rows."""
    selects = ", ".join(f"@@GLOBAL.{n} AS {n}" for n in names)
    out = oh.seed_exec(cluster, ns, oh.seed_pod(cluster, ns, name), f"SELECT {selects};").splitlines()
    return dict(zip(out[0].split("\t"), out[1].split("\t"), strict=True))


def patch_spec(cluster: harness.Cluster, ns: str, name: str, spec: dict[str, object]) -> int:
    """Merge ``spec`` into the object's; the generation it makes."""
    cluster.kubectl("-n", ns, "patch", "mysqls.otus.homework", name, "--type=merge", "-p",
                    json.dumps({"spec": spec}))
    return int(cluster.get("-n", ns, "mysqls.otus.homework", name)["metadata"]["generation"])


@pytest.mark.usefixtures("explain")
def test_server_options_apply_live_or_restart_the_server(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """spec.config reaches the server: the options of a new instance are in effect; a change of
    options a running server takes (max_connections, sql_mode) is applied in the same pod,
    its server never restarted; a removed one goes back to the server's default; a value the
    server refuses gives a Failure condition and a Warning Event quoting the server and naming
    spec.config, and the instance recovers once it is mended; a change of an option that needs
    a restart (performance_schema) restarts the server, which keeps every option."""

    def one(server: oh.Server) -> None:
        ns, name = op_namespace, server.name("config")
        cluster.apply(oh.mysql_object(name, ns, image=server.image, config={"max_connections": 120}))
        oh.wait_successful(cluster, ns, name, operator)
        oh.wait_ready(cluster, ns, name)
        assert variables(cluster, ns, name, "max_connections") == {"max_connections": "120"}
        default_mode = variables(cluster, ns, name, "sql_mode")["sql_mode"]
        pod = oh.server_pod(cluster, ns, name)

        generation = patch_spec(cluster, ns, name, {"config": {"max_connections": 250, "sql_mode": "ANSI_QUOTES"}})
        oh.wait_successful(cluster, ns, name, operator, generation=generation)
        assert variables(cluster, ns, name, "max_connections", "sql_mode") == {
            "max_connections": "250", "sql_mode": "ANSI_QUOTES"}
        assert oh.server_pod(cluster, ns, name) == pod, "a live option restarted the server"

        generation = patch_spec(cluster, ns, name, {"config": {"sql_mode": None}})
        oh.wait_successful(cluster, ns, name, operator, generation=generation)
        assert variables(cluster, ns, name, "max_connections", "sql_mode") == {
            "max_connections": "250", "sql_mode": default_mode}
        assert oh.server_pod(cluster, ns, name) == pod, "a removed live option restarted the server"

        # a value of the right shape that the server refuses: the server's words, the field
        patch_spec(cluster, ns, name, {"config": {"sql_mode": "NO_SUCH_MODE"}})

        def failed() -> bool:
            cond = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure")
            return bool(cond and cond.get("status") == "True" and "spec.config" in cond.get("message", ""))
        cluster.wait_for(failed, timeout=240, what="the Failure condition naming spec.config", interval=2)
        cond = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure") or {}
        assert "NO_SUCH_MODE" in cond["message"] and "ERROR" in cond["message"], cond
        warnings = oh.wait_warning(cluster, ns, name, lambda m: "spec.config" in m and "NO_SUCH_MODE" in m)
        assert any("spec.config" in m and "NO_SUCH_MODE" in m for m in warnings), warnings
        assert oh.server_pod(cluster, ns, name) == pod

        generation = patch_spec(cluster, ns, name, {"config": {"sql_mode": "ANSI_QUOTES"}})
        oh.wait_successful(cluster, ns, name, operator, generation=generation)
        assert variables(cluster, ns, name, "sql_mode") == {"sql_mode": "ANSI_QUOTES"}
        assert oh.server_pod(cluster, ns, name) == pod

        # an option the server reads only at start: a new pod, every option in effect
        generation = patch_spec(cluster, ns, name, {"config": {"performance_schema": "OFF"}})
        oh.wait_successful(cluster, ns, name, operator, generation=generation)
        cluster.wait_for(lambda: oh.server_pod(cluster, ns, name)[0] != pod[0], timeout=180,
                         what="the server's pod to be replaced", interval=2)
        oh.wait_ready(cluster, ns, name)
        assert variables(cluster, ns, name, "performance_schema", "max_connections", "sql_mode") == {
            "performance_schema": "0", "max_connections": "250", "sql_mode": "ANSI_QUOTES"}
        config_map = cluster.get("-n", ns, "configmap", f"{name}-config")
        assert "performance_schema = OFF" in config_map["data"]["server.cnf"], config_map["data"]
        # the instance stays: the module's leak scan looks for its passwords

    oh.for_each_server(one)


@pytest.mark.usefixtures("explain")
def test_production_settings_reach_the_running_instance(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """Each production setting of the spec is in effect: resources, tolerations, priority
    class, pod labels and annotations in the server's pod; a NodePort Service with its
    annotation that answers on the node's address; a node selector no node matches leaves
    the new pod Pending and the Ready condition says why (Unschedulable, the scheduler's
    words); removed again, the instance is Ready. The Service switched back to ClusterIP
    loses its node port and annotation."""
    priority = f"mysql-test-{op_namespace}"
    cluster.apply(json.dumps({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                              "metadata": {"name": priority}, "value": 1000,
                              "description": "test_production_settings_reach_the_running_instance"}))
    node = cluster.get("nodes")["items"][0]
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")

    def one(server: oh.Server) -> None:
        ns, name = op_namespace, server.name("settings")
        settings = {
            "resources": {"requests": {"cpu": "150m", "memory": "300Mi"}, "limits": {"memory": "1Gi"}},
            "tolerations": [{"key": "example.com/dedicated", "operator": "Equal", "value": "db",
                             "effect": "NoSchedule"}],
            "priorityClassName": priority,
            "podLabels": {"team": "payments", "example.com/tier": "db"},
            "podAnnotations": {"example.com/note": "settings test"},
            "service": {"type": "NodePort", "annotations": {"example.com/load-balancer": "internal"}},
        }
        cluster.apply(oh.mysql_object(name, ns, image=server.image, **settings))
        oh.wait_successful(cluster, ns, name, operator)
        oh.wait_ready(cluster, ns, name)
        pod = cluster.get("-n", ns, "pod", oh.seed_pod(cluster, ns, name))
        container = pod["spec"]["containers"][0]
        assert container["resources"] == settings["resources"], container["resources"]
        assert {"key": "example.com/dedicated", "operator": "Equal", "value": "db",
                "effect": "NoSchedule"} in pod["spec"]["tolerations"], pod["spec"]["tolerations"]
        assert pod["spec"]["priorityClassName"] == priority and pod["spec"]["priority"] == 1000
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert labels["team"] == "payments" and labels["example.com/tier"] == "db", labels
        assert labels["app"] == name, labels  # the walkthrough's label stays the operator's
        assert annotations["example.com/note"] == "settings test", annotations
        service = cluster.get("-n", ns, "service", name)
        assert service["spec"]["type"] == "NodePort", service["spec"]
        assert service["metadata"]["annotations"]["example.com/load-balancer"] == "internal"
        node_port = service["spec"]["ports"][0]["nodePort"]
        out = oh.sql_job(cluster, ns, address, "otus-database", "SELECT CURRENT_USER();",
                         secret=f"{name}-credentials", image=server.image, port=node_port,
                         wait_for_server=True)
        assert out.strip().startswith("root@"), out
        # back to ClusterIP: the API server drops the node port the apply never named
        generation = patch_spec(cluster, ns, name, {"service": {"type": "ClusterIP", "annotations": None}})
        oh.wait_successful(cluster, ns, name, operator, generation=generation)
        service = cluster.get("-n", ns, "service", name)
        assert service["spec"]["type"] == "ClusterIP", service["spec"]
        assert all("nodePort" not in port for port in service["spec"]["ports"]), service["spec"]
        assert "example.com/load-balancer" not in (service["metadata"].get("annotations") or {})

        # a node selector no node matches: the new pod stays Pending, and the object says why
        cluster.kubectl("-n", ns, "patch", "mysqls.otus.homework", name, "--type=merge", "-p",
                        json.dumps({"spec": {"nodeSelector": {"example.com/no-such-node": "x"}}}))
        cluster.wait_for(lambda: oh.ready_condition(cluster, ns, name).get("reason") == "Unschedulable",
                         timeout=180, what="the Ready condition to say the pod is not scheduled", interval=2)
        ready = oh.ready_condition(cluster, ns, name)
        assert ready["status"] == "False" and "node affinity/selector" in ready["message"], ready
        pending = [p for p in cluster.get("-n", ns, "pods", "-l", f"app={name}")["items"]
                   if not p["metadata"].get("deletionTimestamp")]
        assert [p["status"]["phase"] for p in pending] == ["Pending"], pending
        cluster.kubectl("-n", ns, "patch", "mysqls.otus.homework", name, "--type=merge", "-p",
                        json.dumps({"spec": {"nodeSelector": None}}))
        oh.wait_successful(cluster, ns, name, operator)
        oh.wait_ready(cluster, ns, name)
        cluster.wait_for(lambda: oh.ready_condition(cluster, ns, name).get("reason") == "LoginAccepted",
                         timeout=120, what="the Ready condition to follow the Deployment", interval=2)
        cluster.kubectl("-n", ns, "delete", "mysqls.otus.homework", name, "--timeout=300s", timeout=330)

    try:
        oh.for_each_server(one)
    finally:
        cluster.kubectl("delete", "priorityclass", priority, "--ignore-not-found")


def scraped(text: str, metric: str) -> float | None:
    """The value of an unlabelled sample in a Prometheus text exposition."""
    for line in text.splitlines():
        if line.startswith(metric + " "):
            return float(line.split()[-1])
    return None


@pytest.mark.usefixtures("explain")
def test_metrics_sidecar_serves_the_servers_metrics(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """spec.metrics.enabled: a mysqld-exporter sidecar logs in with the health account; the
    Service has a port named metrics and the label a ServiceMonitor selects; a scrape through
    it says mysql_up 1, and the server's query counter rises with the queries a client runs."""

    def one(server: oh.Server) -> None:
        ns, name = op_namespace, server.name("metrics")
        cluster.apply(oh.mysql_object(name, ns, image=server.image, metrics={"enabled": True}))
        oh.wait_successful(cluster, ns, name, operator)
        oh.wait_ready(cluster, ns, name)
        service = cluster.get("-n", ns, "service", name)
        assert service["metadata"]["labels"].get("otus.homework/metrics") == "true", service["metadata"]
        assert {"name": "metrics", "port": 9104} in [{"name": p["name"], "port": p["port"]}
                                                     for p in service["spec"]["ports"]], service["spec"]

        def scrape() -> str:
            return cluster.kubectl("get", "--raw", f"/api/v1/namespaces/{ns}/services/{name}:metrics/proxy/metrics").stdout

        first: dict[str, float | None] = {}

        def up() -> bool:
            text = scrape()
            first.update(up=scraped(text, "mysql_up"), queries=scraped(text, "mysql_global_status_queries"))
            return first["up"] == 1.0

        cluster.wait_for(up, timeout=120, what="the exporter's scrape to say mysql_up 1", interval=3)
        assert first["queries"] is not None, scrape()[:3000]
        oh.sql_job(cluster, ns, f"{name}.{ns}.svc.cluster.local", "otus-database",
                   " ".join(f"SELECT {i};" for i in range(50)), secret=f"{name}-credentials", image=server.image)
        later = scraped(scrape(), "mysql_global_status_queries")
        assert later is not None and later >= first["queries"] + 50, (first, later)
        pod = cluster.get("-n", ns, "pod", oh.seed_pod(cluster, ns, name))
        assert sorted(c["name"] for c in pod["spec"]["containers"]) == ["metrics", "mysql"]
        assert all(s["restartCount"] == 0 for s in pod["status"]["containerStatuses"]), pod["status"]
        cluster.kubectl("-n", ns, "delete", "mysqls.otus.homework", name, "--timeout=300s", timeout=330)

    oh.for_each_server(one)


def test_no_secret_appears_outside_its_secrets(cluster: harness.Cluster, op_namespace: str,
                                              operator: harness.Operator) -> None:
    """Last in the module: every Secret value still in the namespace appears nowhere but in its
    Secret (the operator's log, its runner artifacts, Events, status, pod and Job specs: the
    config Jobs' too, which log in as root)."""
    assert len(oh.secret_values(cluster, op_namespace)) > 0, "nothing to look for"
    assert oh.leaks(cluster, op_namespace, operator) == []
