"""The molecule scenarios (molecule/role, molecule/operator) run as a user runs them.

Each test runs `molecule test -s NAME` from the repository root against the cluster of
the `cluster` fixture, in a namespace of its own (`MOLECULE_K8S_NAMESPACE`) and with its
own ephemeral directory, so it never collides with a developer's run of the same
scenario. Molecule's output is printed when it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests import kube

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 1200  # seconds; measured: role about 2 minutes, operator about 2.5


def _molecule() -> str:
    beside_python = Path(sys.executable).parent / "molecule"
    found = str(beside_python) if beside_python.exists() else shutil.which("molecule")
    if not found:
        pytest.fail("molecule is not installed (requirements-dev.txt pins it): run hack/venv.sh")
    return found


def _env(cluster: kube.Cluster, scenario: str, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)  # ansible-playbook, ansible-config of this environment
    env.update({
        "PATH": f"{bindir}{os.pathsep}{env.get('PATH', os.defpath)}",
        "KUBECONFIG": cluster.kubeconfig,
        "MOLECULE_K8S_NAMESPACE": f"molecule-{scenario}-{uuid.uuid4().hex[:8]}",
        "MOLECULE_EPHEMERAL_DIRECTORY": str(tmp_path / "ephemeral"),
        "NO_COLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
    })
    return env


@pytest.mark.parametrize("scenario", ["role", "operator"])
def test_scenario(cluster: kube.Cluster, scenario: str, tmp_path: Path) -> None:
    env = _env(cluster, scenario, tmp_path)
    started = time.monotonic()
    try:
        done = subprocess.run([_molecule(), "test", "-s", scenario], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        # molecule was killed mid-sequence: its own cleanup never ran.
        subprocess.run([_molecule(), "destroy", "-s", scenario], cwd=REPO, env=env,
                       capture_output=True, timeout=600)
        partial = e.stdout or ""
        print(partial.decode(errors="replace") if isinstance(partial, bytes) else partial)
        pytest.fail(f"molecule test -s {scenario} did not finish within {TIMEOUT}s")
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    if done.returncode != 0:
        print(output)
    assert done.returncode == 0, (
        f"molecule test -s {scenario} exited {done.returncode} after {seconds:.0f}s "
        f"(namespace {env['MOLECULE_K8S_NAMESPACE']}); its output is printed above. Tail:\n{output[-6000:]}"
    )
    print(f"molecule test -s {scenario}: {seconds:.0f}s")
    if scenario == "role":
        # Molecule's idempotence step ran and found nothing changed on the second converge.
        assert "role > idempotence: Executed: Successful" in output, output[-6000:]
