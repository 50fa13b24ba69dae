#!/usr/bin/env python3
"""Role-level driver: does for one MySQL object what the operator shim does.

It reads the object, picks the role the way watches.yaml says (mysql, or
mysql_finalizer once the object is being deleted), passes the same variables as the
shim (ansible_operator_meta, the spec in snake_case, _otus_homework_mysql and
_otus_homework_mysql_spec, every string marked unsafe), runs ansible-playbook, merges
the role's set_stats into .status with Successful/Failure conditions, and adds or
removes the finalizer. It prints one JSON line: role, rc, changed, seconds, message.

    drive.py NAMESPACE NAME [--keep-output DIR] [-e KEY=VALUE ...]

Uses KUBECONFIG and the ansible-playbook next to this Python.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config

GROUP, VERSION, PLURAL = "otus.homework", "v1", "mysqls"
FINALIZER = "otus.homework/finalizer"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def mark(value: Any, convert_keys: bool) -> Any:
    if isinstance(value, dict):
        return {(snake(k) if convert_keys else k): mark(v, convert_keys) for k, v in value.items()}
    if isinstance(value, list):
        return [mark(v, convert_keys) for v in value]
    if isinstance(value, str):
        # What markUnsafe does (as the shim): JSON extra vars with this wrapper load as
        # unsafe strings. YAML's `!unsafe '123'` would load as an integer in ansible-core 2.19.
        return {"__ansible_unsafe": value}
    return value


def extravars(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    out: dict[str, Any] = {
        "ansible_operator_meta": {
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
        },
        "_otus_homework_mysql": mark(obj, convert_keys=False),
        "_otus_homework_mysql_spec": mark(spec, convert_keys=False),
    }
    out.update(mark(spec, convert_keys=True))
    return out


def failed_message(output: dict[str, Any]) -> str:
    for play in output.get("plays", []):
        for task in play.get("tasks", []):
            for result in task.get("hosts", {}).values():
                if result.get("failed") and not result.get("ignore_errors"):
                    return "%s: %s" % (task["task"]["name"], result.get("msg", ""))
    return ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("namespace")
    parser.add_argument("name")
    parser.add_argument("--keep-output", type=Path)
    parser.add_argument("-e", dest="extra", action="append", default=[])
    args = parser.parse_args()

    config.load_kube_config()
    api = client.CustomObjectsApi()
    obj = api.get_namespaced_custom_object(GROUP, VERSION, args.namespace, PLURAL, args.name)
    deleting = bool(obj["metadata"].get("deletionTimestamp"))
    if deleting and FINALIZER not in (obj["metadata"].get("finalizers") or []):
        print(json.dumps({"role": None, "message": "being deleted without our finalizer"}))
        return 0
    if not deleting and FINALIZER not in (obj["metadata"].get("finalizers") or []):
        obj = api.patch_namespaced_custom_object(
            GROUP, VERSION, args.namespace, PLURAL, args.name,
            {"metadata": {"finalizers": (obj["metadata"].get("finalizers") or []) + [FINALIZER]}},
        )
    role = "mysql_finalizer" if deleting else "mysql"

    with tempfile.TemporaryDirectory() as tmp:
        vars_file = Path(tmp) / "vars.json"
        vars_file.write_text(json.dumps(extravars(obj), sort_keys=True))
        env = dict(
            os.environ,
            ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
            ANSIBLE_SHOW_CUSTOM_STATS="1",
            ANSIBLE_ROLES_PATH=str(REPO / "roles"),
            ANSIBLE_LOCALHOST_WARNING="0",
            ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
            ANSIBLE_NOCOLOR="1",
        )
        env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
        cmd = [
            str(Path(sys.executable).parent / "ansible-playbook"),
            str(HERE / "run_role.yml"),
            "-e", "@" + str(vars_file),
            "-e", "mysql_test_role=" + role,
        ]
        for item in args.extra:
            cmd += ["-e", item]
        started = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        seconds = round(time.monotonic() - started, 1)

    try:
        output = json.loads(proc.stdout)
    except ValueError:
        sys.stderr.write(proc.stdout + proc.stderr)
        return 2
    if args.keep_output:
        args.keep_output.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%H%M%S")
        (args.keep_output / ("%s-%s-%s.json" % (stamp, args.name, role))).write_text(proc.stdout)
    stats = output.get("stats", {}).get("localhost", {})
    custom = output.get("global_custom_stats", {})
    error = failed_message(output) if proc.returncode else ""

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if proc.returncode == 0:
        conditions = [{"type": "Successful", "status": "True", "reason": "Successful",
                       "message": "Last reconciliation succeeded", "lastTransitionTime": now}]
    else:
        conditions = [{"type": "Successful", "status": "False", "reason": "Failed",
                       "message": "Last reconciliation failed", "lastTransitionTime": now},
                      {"type": "Failure", "status": "True", "reason": "Failed",
                       "message": error, "lastTransitionTime": now}]
    if not deleting:
        api.patch_namespaced_custom_object_status(
            GROUP, VERSION, args.namespace, PLURAL, args.name,
            {"status": dict(custom, conditions=conditions)},
        )
    elif proc.returncode == 0:
        fresh = api.get_namespaced_custom_object(GROUP, VERSION, args.namespace, PLURAL, args.name)
        finalizers = [f for f in fresh["metadata"].get("finalizers") or [] if f != FINALIZER]
        api.patch_namespaced_custom_object(
            GROUP, VERSION, args.namespace, PLURAL, args.name,
            {"metadata": {"finalizers": finalizers or None,
                          "resourceVersion": fresh["metadata"]["resourceVersion"]}},
        )
    print(json.dumps({
        "role": role, "rc": proc.returncode, "seconds": seconds,
        "ok": stats.get("ok"), "changed": stats.get("changed"), "failures": stats.get("failures"),
        "message": custom.get("message", ""), "error": error,
    }))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
