"""mysql_common's filter_plugins/mysql_k8s.py: when an object needs writing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import sources

SOURCE = Path(__file__).resolve().parents[2] / "roles/mysql_common/filter_plugins/mysql_k8s.py"


mysql_k8s = sources.load(SOURCE, "mysql_k8s")

SERVICE: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "db", "namespace": "ns", "labels": {"app": "db"}},
    "spec": {"ports": [{"name": "mysql", "port": 3306}], "selector": {"app": "db"}},
}


def live(desired: dict[str, Any], last_applied: Any = None, **changes: Any) -> dict[str, Any]:
    """`desired` as the API server returns it after `kubectl apply`-style apply of `last_applied`."""
    obj = json.loads(json.dumps(desired))
    obj["metadata"]["annotations"] = {mysql_k8s.LAST_APPLIED: json.dumps(desired if last_applied is None else last_applied)}
    obj["metadata"]["uid"] = "u-1"
    obj["spec"]["clusterIP"] = "10.0.0.7"
    obj["spec"]["ports"][0]["protocol"] = "TCP"
    obj["status"] = {"loadBalancer": {}}
    obj["spec"].update(changes)
    return obj


def test_in_sync_ignores_server_defaults() -> None:
    assert mysql_k8s.k8s_in_sync(live(SERVICE), SERVICE)


@pytest.mark.parametrize("actual", [None, {}])
def test_missing_object_is_out_of_sync(actual: Any) -> None:
    assert not mysql_k8s.k8s_in_sync(actual, SERVICE)


def test_hand_edit_is_out_of_sync() -> None:
    assert not mysql_k8s.k8s_in_sync(live(SERVICE, selector={"app": "other"}), SERVICE)


def test_field_removed_from_template_is_out_of_sync() -> None:
    """The live object matches, but it was applied with a field the template no longer has."""
    older = json.loads(json.dumps(SERVICE))
    older["metadata"]["labels"]["tier"] = "db"
    assert not mysql_k8s.k8s_in_sync(live(SERVICE, last_applied=older), SERVICE)


def test_list_length_matters() -> None:
    two_ports = live(SERVICE, ports=[{"name": "mysql", "port": 3306}, {"name": "x", "port": 1}])
    assert not mysql_k8s.k8s_in_sync(two_ports, SERVICE)


def test_broken_last_applied_is_out_of_sync() -> None:
    obj = live(SERVICE)
    obj["metadata"]["annotations"][mysql_k8s.LAST_APPLIED] = "{not json"
    assert not mysql_k8s.k8s_in_sync(obj, SERVICE)


SECRET: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
    "metadata": {"name": "db-credentials", "namespace": "ns", "labels": {"app": "db"},
                 "annotations": {"otus.homework/server-password": "set"},
                 "ownerReferences": [{"apiVersion": "otus.homework/v1", "kind": "MySQL", "name": "db", "uid": "u-0"}]},
    "data": {"password": "YWJj", "bootstrap-password": "ZGVm"},
}


def applied_server_side(desired: dict[str, Any], manager: str = "mysql-operator",
                        fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """`desired` as the API server returns it after a server-side apply by `manager`: no
    last-applied annotation, the applied field set in managedFields (the shape the API server
    writes: identity keys absent, owner references keyed by uid)."""
    obj = json.loads(json.dumps(desired))
    owned = fields if fields is not None else {
        "f:data": {f"f:{key}": {} for key in desired["data"]},
        "f:metadata": {"f:labels": {f"f:{key}": {} for key in desired["metadata"]["labels"]},
                       "f:annotations": {f"f:{key}": {} for key in desired["metadata"]["annotations"]},
                       "f:ownerReferences": {'k:{"uid":"u-0"}': {}}},
        "f:type": {},
    }
    obj["metadata"]["managedFields"] = [
        {"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": owned},
        {"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}},
    ]
    obj["metadata"]["uid"] = "u-1"
    obj["metadata"]["resourceVersion"] = "7"
    return obj


def test_a_secret_applied_server_side_as_desired_is_in_sync() -> None:
    assert mysql_k8s.k8s_in_sync(applied_server_side(SECRET), SECRET)


def test_a_secret_applied_server_side_by_another_manager_is_out_of_sync() -> None:
    assert not mysql_k8s.k8s_in_sync(applied_server_side(SECRET, manager="someone-else"), SECRET)


def test_a_key_the_server_side_apply_owns_but_the_template_dropped_is_out_of_sync() -> None:
    older = json.loads(json.dumps(SECRET))
    older["data"]["password-version"] = "MQ=="
    assert not mysql_k8s.k8s_in_sync(applied_server_side(older), SECRET)


def test_a_key_the_template_added_is_out_of_sync() -> None:
    newer = json.loads(json.dumps(SECRET))
    newer["data"]["password-version"] = "MQ=="
    live_obj = applied_server_side(SECRET)
    live_obj["data"]["password-version"] = "MQ=="  # written by someone else
    assert not mysql_k8s.k8s_in_sync(live_obj, newer)


def test_a_changed_value_of_a_secret_applied_server_side_is_out_of_sync() -> None:
    changed = json.loads(json.dumps(SECRET))
    changed["data"]["password"] = "eHl6"
    assert not mysql_k8s.k8s_in_sync(applied_server_side(SECRET), changed)


def test_out_of_sync_keeps_order_and_skips_unmanaged() -> None:
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {}}
    pairs = [
        {"current": {}, "desired": {}},              # not managed in this configuration
        {"current": {}, "desired": pv},               # missing
        {"current": live(SERVICE), "desired": SERVICE},  # in sync
        {"current": None, "desired": pvc},            # missing
    ]
    assert mysql_k8s.k8s_out_of_sync(pairs) == [pv, pvc]
    assert mysql_k8s.k8s_out_of_sync([]) == []


@pytest.mark.parametrize(("desired", "stored"), [(0.5, "500m"), ("0.5", "500m"), (1, "1"), ("1073741824", "1Gi"),
                                                 ("1024Mi", "1Gi"), ("2", "2")])
def test_a_quantity_the_server_rewrote_is_in_sync(desired: Any, stored: str) -> None:
    """The API server keeps a quantity in its canonical form: cpu 0.5 is read back as 500m."""
    wanted = json.loads(json.dumps(SERVICE))
    wanted["spec"]["resources"] = {"requests": {"cpu": desired}}
    obj = live(wanted, resources={"requests": {"cpu": stored}})
    assert mysql_k8s.k8s_in_sync(obj, wanted)


@pytest.mark.parametrize(("desired", "stored"), [(0.5, "1"), ("500m", "501m"), ("1Gi", "1G"), ("1", "one")])
def test_a_different_quantity_is_out_of_sync(desired: Any, stored: str) -> None:
    wanted = json.loads(json.dumps(SERVICE))
    wanted["spec"]["resources"] = {"requests": {"cpu": desired}}
    assert not mysql_k8s.k8s_in_sync(live(wanted, resources={"requests": {"cpu": stored}}), wanted)


def test_numbers_and_booleans_are_not_quantities() -> None:
    wanted = json.loads(json.dumps(SERVICE))
    assert not mysql_k8s.k8s_in_sync(live(wanted, ports=[{"name": "mysql", "port": 3307}]), wanted)
    wanted["spec"]["publishNotReadyAddresses"] = True
    assert not mysql_k8s.k8s_in_sync(live(wanted, publishNotReadyAddresses="1"), wanted)


def owned(kind: str, name: str, owner: str, *, owner_kind: str = "MySQL", instance: str = "") -> dict[str, Any]:
    return {"kind": kind, "metadata": {
        "name": name, "namespace": "ns", "labels": {"app.kubernetes.io/instance": instance or owner},
        "ownerReferences": [{"kind": owner_kind, "name": owner, "uid": "u", "controller": True}]}}


def test_objects_of_the_instance_and_of_its_earlier_incarnation_are_its_own() -> None:
    pairs = [{"current": owned("Service", "db-direct", "db"), "desired": {"kind": "Service"}},
             {"current": {}, "desired": {"kind": "Secret"}},  # not there yet
             {"current": owned("Deployment", "db", "other"), "desired": {}},  # not managed here
             {"current": {"kind": "PersistentVolume", "metadata": {"name": "v", "labels": {
                 "app.kubernetes.io/instance": "db", "otus.homework/mysql-namespace": "ns"}}},
              "desired": {"kind": "PersistentVolume"}}]
    assert mysql_k8s.k8s_foreign(pairs, "db", "ns") == []


def test_another_instances_object_of_the_same_name_is_named() -> None:
    # instance db's Service db-direct, met by instance db-direct (whose Service is db-direct)
    pairs = [{"current": owned("Service", "db-direct", "db"), "desired": {"kind": "Service"}}]
    assert mysql_k8s.k8s_foreign(pairs, "db-direct", "ns") == [
        "Service ns/db-direct belongs to MySQL 'db', not to MySQL 'db-direct'"]


@pytest.mark.parametrize("current", [
    {"kind": "Service", "metadata": {"name": "db-direct", "namespace": "ns"}},  # a user's own
    owned("Service", "db-direct", "app", owner_kind="Deployment"),
    {"kind": "PersistentVolume", "metadata": {"name": "v", "labels": {
        "app.kubernetes.io/instance": "db", "otus.homework/mysql-namespace": "other"}}},
])
def test_an_object_that_is_no_instances_or_another_namespaces_is_refused(current: dict[str, Any]) -> None:
    problems = mysql_k8s.k8s_foreign([{"current": current, "desired": {"kind": current["kind"]}}], "db", "ns")
    assert len(problems) == 1 and current["kind"] in problems[0], problems
