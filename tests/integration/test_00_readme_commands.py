"""The README's two commands in the order a new user types them: `make run`
until the sample MySQL object is ready, Ctrl-C, then `make test`, which is this very suite:
`make test` runs this file first and alone (its operator watches every namespace, so it
would reconcile the objects of tests running beside it), so every later test runs on a
cluster that was used, with
`default/mysql-instance` and its finalizer left behind by an operator that is gone.

Only against the local cluster: on a cluster of the user's own (`$KUBECONFIG`), `make run`
would apply the sample to its default namespace."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests import harness

READY = ">> MySQL 'mysql-instance' is ready."


def _zombie(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True  # gone meanwhile


def test_make_run_then_ctrl_c_leaves_a_used_cluster(cluster: harness.Cluster, tmp_path: Path) -> None:
    if not cluster.local:
        pytest.skip("make run applies the sample to the default namespace: the local cluster only")
    log = tmp_path / "make-run.log"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}  # as typed: the local cluster
    with log.open("wb") as out:
        run = subprocess.Popen(["make", "run"], cwd=harness.REPO, env=env, stdin=subprocess.DEVNULL,
                               stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    stopped = threading.Event()
    try:
        deadline = time.monotonic() + 600
        while READY not in log.read_text(errors="replace"):
            assert run.poll() is None, f"make run exited with {run.returncode}:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"the sample never became ready:\n{log.read_text()[-4000:]}"
            time.sleep(2)
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
        run.wait(timeout=120)
        stopped.set()
    finally:
        if not stopped.is_set():
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    # The operator and its warm servers are gone with it; nothing of the session is left
    # (zombies aside: exited, waiting for init to reap them).
    leftover = subprocess.run(["pgrep", "-s", str(run.pid)], capture_output=True, text=True, check=False)
    assert [pid for pid in leftover.stdout.split() if not _zombie(pid)] == [], \
        f"processes of make run outlived Ctrl-C: {leftover.stdout}"
    # What the rest of the suite runs beside: the sample, with the finalizer nobody serves now.
    obj = cluster.get("-n", "default", "mysqls.otus.homework", "mysql-instance")
    assert obj["metadata"].get("finalizers"), obj["metadata"]
