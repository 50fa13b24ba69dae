"""The SDK's `--leader-elect`: of two operators started with the SDK's
leader-election flags for one namespace, one holds the Lease and reconciles; the other
stands by, answers its health probe and runs nothing. SIGKILLed, the leader stops renewing;
once the Lease has gone unrenewed for its duration the other takes it and reconciles what
changed meanwhile. A leader stopped cleanly releases the Lease (no holder).

SDK operators' Deployments pass `--leader-elect --leader-election-id=<name>` (the scaffold's
manager.yaml), so such a Deployment starts unchanged only if the operator takes them. Short durations here (6 s lease) keep the test quick; the outcome asserted
is who ran what, never how fast.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import harness
from tests.integration import operator_harness as oh

LABEL = "otus.homework/leader-test"
LEASE = "otus-leader-test"
ROLE = oh.seen_role()


@pytest.fixture(scope="module")
def leader_namespace(cluster: harness.Cluster) -> Iterator[str]:
    with oh.module_namespace(cluster, "leader") as name:
        yield name


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def candidate(cluster: harness.Cluster, ns: str, workdir: Path, watches: Path) -> tuple[harness.Operator, int]:
    """An operator with the SDK's leader-election flags, not started; its health port."""
    port = free_port()
    operator = oh.start_operator(cluster, ns, workdir, watches=watches, start=False)
    operator.command = [sys.executable, "-m", "ansible_kopf", "--leader-elect",
                        f"--leader-election-id={LEASE}", "--leader-election-namespace", ns,
                        "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s",
                        "--leader-elect-retry-period=1s", f"--health-probe-bind-address=127.0.0.1:{port}"]
    return operator, port


def test_one_of_two_operators_leads_and_the_other_takes_over_when_it_dies(
        cluster: harness.Cluster, leader_namespace: str, tmp_path: Path) -> None:
    ns = leader_namespace
    watches = oh.role_watches(tmp_path, [{
        "version": "v1", "group": "", "kind": "ConfigMap", "role": "seen",
        "selector": {"matchLabels": {LABEL: "watched"}}, "reconcilePeriod": "0s",
    }], {"seen": ROLE})
    first, _ = candidate(cluster, ns, tmp_path / "first", watches)
    second, second_port = candidate(cluster, ns, tmp_path / "second", watches)

    def watched(name: str) -> None:
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": name, "namespace": ns, "labels": {LABEL: "watched"}}}))

    def seen(name: str) -> bool:
        return cluster.kubectl("-n", ns, "get", "configmap", f"{name}-seen", check=False).returncode == 0

    try:
        first.start()
        first.wait_ready(f"leading: holds Lease {ns}/{LEASE}")
        second.start()
        second.wait_ready(f"Lease {ns}/{LEASE} is held by")
        lease = cluster.get("-n", ns, "lease", LEASE)
        assert lease["spec"]["holderIdentity"].startswith(socket.gethostname() + "_"), lease
        assert lease["spec"]["leaseDurationSeconds"] == 6, lease
        # The standby answers its health probe (a Deployment's liveness probe would restart it).
        with urllib.request.urlopen(f"http://127.0.0.1:{second_port}/healthz", timeout=10) as response:
            assert response.status == 200

        watched("one")
        cluster.wait_for(lambda: seen("one"), timeout=120, what="the leader to run the role", interval=1)
        # Its run's summary is written when the run ends, after the ConfigMap.
        cluster.wait_for(lambda: "one" in [s.name for s in first.summaries()], timeout=60,
                         what="the leader's run of one to end", interval=1)
        assert {s.name for s in first.summaries()} == {"one"}
        assert second.summaries() == [], "the standby ran a role"
        assert "leading: holds" not in second.log()

        os.killpg(first.pid, signal.SIGKILL)  # no release: the Lease must expire
        first.process.wait()  # type: ignore[union-attr]
        watched("two")
        cluster.wait_for(lambda: seen("two"), timeout=120, what="the standby to take over and run the role",
                         interval=1)
        assert f"took over Lease {ns}/{LEASE}" in second.log()
        # Its run's summary is written when the run ends, after the ConfigMap (the new
        # leader also resumes "one", as any operator starting does).
        cluster.wait_for(lambda: "two" in [s.name for s in second.summaries()], timeout=60,
                         what="the new leader's run of two to end", interval=1)
        holder = cluster.get("-n", ns, "lease", LEASE)["spec"]
        assert holder["holderIdentity"] != lease["spec"]["holderIdentity"]
        assert holder["leaseTransitions"] == lease["spec"].get("leaseTransitions", 0) + 1

        second.stop()  # SIGTERM: a clean stop releases the Lease
        assert second.process is not None and second.process.returncode == 0, second.log()[-3000:]
        assert f"released Lease {ns}/{LEASE}" in second.log()
        assert not cluster.get("-n", ns, "lease", LEASE)["spec"].get("holderIdentity")
    finally:
        first.stop()
        second.stop()
