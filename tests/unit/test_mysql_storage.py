"""mysql_common's filter_plugins/mysql_storage.py: quantities, and the data volume's size
and the reason status.storage gives when it is not the one requested."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import sources

SOURCE = Path(__file__).resolve().parents[2] / "roles/mysql_common/filter_plugins/mysql_storage.py"

storage = sources.load(SOURCE, "mysql_storage")


@pytest.mark.parametrize(("quantity", "expected"), [
    ("1Gi", 2**30), ("1500M", 1_500_000_000), ("2e3", 2000), ("0.5Ki", 512), ("100m", 1), (" 10 ", 10),
])
def test_quantity_to_bytes(quantity: str, expected: int) -> None:
    assert storage.quantity_to_bytes(quantity) == expected


@pytest.mark.parametrize("quantity", ["", "Gi", "1GB", "1 Gi x", "-1Gi"])
def test_bad_quantity(quantity: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        storage.quantity_to_bytes(quantity)


def size(requested: str, current: str = "1Gi", wanted_class: str = "fast", data_class: str = "fast",
         class_found: Any = True, expandable: Any = True) -> dict[str, Any]:
    return dict(storage.data_volume_size(requested, current=current, wanted_class=wanted_class,
                                         data_class=data_class, class_found=class_found,
                                         expandable=expandable))


def test_a_new_volume_gets_the_requested_size() -> None:
    assert size("5Gi", current="") == {"size": "5Gi", "reason": ""}


def test_an_unchanged_size_is_compared_in_bytes() -> None:
    assert size("1024Mi") == {"size": "1Gi", "reason": ""}


def test_a_volume_grows_when_its_class_allows_expansion() -> None:
    assert size("2Gi") == {"size": "2Gi", "reason": ""}


@pytest.mark.parametrize(("changes", "reason"), [
    ({"wanted_class": "", "data_class": "", "class_found": False, "expandable": False},
     "The data volume is a hostPath PersistentVolume without a StorageClass, which cannot be expanded:"
     " it stays at 1Gi."),
    ({"class_found": False, "expandable": False},
     "StorageClass 'fast' does not exist, so the volume cannot be expanded: it stays at 1Gi."),
    ({"expandable": False},
     "StorageClass 'fast' does not allow volume expansion: the volume stays at 1Gi."),
])
def test_a_volume_that_cannot_grow_keeps_its_size_and_says_why(changes: dict[str, Any], reason: str) -> None:
    assert size("2Gi", **changes) == {"size": "1Gi", "reason": reason}


def test_shrinking_is_reported_never_applied() -> None:
    assert size("512Mi", current="2Gi") == {
        "size": "2Gi",
        "reason": "Shrinking a volume is not supported: requested 512Mi is smaller than the current 2Gi."}


def test_a_changed_class_is_reported_before_the_size() -> None:
    assert size("3Gi", wanted_class="slow", expandable=False)["reason"] == (
        "spec.storage_class cannot change after creation: the data volume keeps StorageClass 'fast'. "
        "StorageClass 'fast' does not allow volume expansion: the volume stays at 1Gi.")
    assert size("1Gi", wanted_class="slow", data_class="") == {
        "size": "1Gi",
        "reason": "spec.storage_class cannot change after creation: the data volume keeps its hostPath volume. "}
