"""The molecule scenarios run as a user runs them: molecule/role and molecule/operator from the
repository root, and each example kind's default scenario from its folder (examples/*).

Each scenario runs `molecule test -s NAME` from its project directory against the cluster of
the `cluster` fixture, in a namespace of its own (`MOLECULE_K8S_NAMESPACE`) and with its
own ephemeral directory, so it never collides with a developer's run of the same scenario
nor with the other scenarios: the module starts all four at once, each test waits for its
own. Molecule's output is printed when it fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import harness

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 1500  # seconds; measured alone: role about 1.5 minutes, operator about 2.5


def _molecule() -> str:
    beside_python = Path(sys.executable).parent / "molecule"
    found = str(beside_python) if beside_python.exists() else shutil.which("molecule")
    if not found:
        pytest.fail("molecule is not installed (requirements-dev.txt pins it): run hack/venv.sh")
    return found


def _env(cluster: harness.Cluster, scenario: str, tmp_path: Path) -> dict[str, str]:
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


# The examples' scenarios default to images the local cluster has; elsewhere, the seeds'.
SEED_IMAGES = {"DATABASE_MONGO_IMAGE": "mongo:4.0", "DATABASE_MYSQL_IMAGE": "mysql:8.0",
               "APPSERVICE_IMAGE": "busybox"}


SCENARIOS = [("", "role"), ("", "operator"), ("examples/database", "default"), ("examples/appservice", "default")]


@dataclass
class Run:
    """One `molecule test` under way: its process, where its output goes, how to clean up."""

    project: str
    scenario: str
    env: dict[str, str]
    output: Path
    process: subprocess.Popen[bytes]
    started: float


@pytest.fixture(scope="module")
def runs(cluster: harness.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Run]]:
    """All four scenarios started at once: they wait on pods far more than they compute, and
    each has its namespace, ephemeral directory and (the operator scenario) operator."""
    started: dict[tuple[str, str], Run] = {}
    try:
        for project, scenario in SCENARIOS:
            tmp_path = tmp_path_factory.mktemp(f"molecule-{Path(project).name or scenario}")
            env = _env(cluster, Path(project).name if project else scenario, tmp_path)
            if project and not cluster.local:
                env.update(SEED_IMAGES)
            output = tmp_path / "molecule.log"
            with output.open("wb") as out:
                process = subprocess.Popen([_molecule(), "test", "-s", scenario], cwd=REPO / project, env=env,
                                           stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True)  # its group: molecule and its ansible-playbooks
            started[project, scenario] = Run(project, scenario, env, output, process, time.monotonic())
        yield started
    finally:
        for run in started.values():
            if run.process.poll() is None:
                # killed mid-sequence (a timeout or an interrupted session): its own cleanup never ran;
                # its ansible-playbook children go with it (killing molecule alone left them running)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.process.pid, signal.SIGKILL)
                run.process.wait()
                subprocess.run([_molecule(), "destroy", "-s", run.scenario], cwd=REPO / run.project, env=run.env,
                               capture_output=True, timeout=600, check=False)


@pytest.mark.parametrize(("project", "scenario"), SCENARIOS)
def test_scenario(runs: dict[tuple[str, str], Run], project: str, scenario: str) -> None:
    run = runs[project, scenario]
    try:
        run.process.wait(timeout=max(1.0, TIMEOUT - (time.monotonic() - run.started)))
    except subprocess.TimeoutExpired:
        print(run.output.read_text(errors="replace"))
        pytest.fail(f"molecule test -s {scenario} did not finish within {TIMEOUT}s")
    seconds = time.monotonic() - run.started
    output = run.output.read_text(errors="replace")
    if run.process.returncode != 0:
        print(output)
    assert run.process.returncode == 0, (
        f"molecule test -s {scenario} exited {run.process.returncode} after {seconds:.0f}s "
        f"(namespace {run.env['MOLECULE_K8S_NAMESPACE']}); its output is printed above. Tail:\n{output[-6000:]}"
    )
    print(f"molecule test -s {scenario} ({project or '.'}): {seconds:.0f}s, run beside the other scenarios")
    if scenario != "operator":
        # Molecule's idempotence step ran and found nothing changed on the second converge.
        # Its summary can list the step as successful after "Idempotence test failed" (seen
        # with molecule 25 on a role that changed on the second converge): check both.
        assert f"{scenario} > idempotence: Executed: Successful" in output, output[-6000:]
        assert "Idempotence test failed" not in output, output[-6000:]
