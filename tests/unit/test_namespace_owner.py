"""tests/harness.py's owner label: the namespaces of a killed test run are told from a live
run's by whether the process that created them still runs."""

from __future__ import annotations

import subprocess
import sys

from tests import harness


def test_this_process_is_alive() -> None:
    assert harness.owner_alive(harness.owner_of_this_process())


def test_a_process_that_ended_is_not() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    host = harness.owner_of_this_process().split(".")[0]
    owner = f"{host}.{child.pid}.{harness.start_time(child.pid)}"
    assert harness.owner_alive(owner)
    child.communicate(b"")
    assert not harness.owner_alive(owner)


def test_a_later_process_with_the_same_pid_is_not_the_owner() -> None:
    host, pid, started = harness.owner_of_this_process().split(".")
    assert not harness.owner_alive(f"{host}.{pid}.{int(started) - 1}")


def test_another_hosts_owner_and_a_foreign_value_are_left_alone() -> None:
    _, pid, _ = harness.owner_of_this_process().split(".")
    assert harness.owner_alive(f"elsewhere.{pid}.1")
    assert harness.owner_alive("not-ours")
