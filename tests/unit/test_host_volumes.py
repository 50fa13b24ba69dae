"""cluster/volumes/host_volumes.py: which hostPath directories the local cluster opens to non-root pods."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import ModuleType

import pytest

from tests import sources

SOURCE = Path(__file__).resolve().parents[2] / "cluster" / "volumes" / "host_volumes.py"


@pytest.fixture(scope="module")
def hv() -> ModuleType:
    return sources.load(SOURCE, "host_volumes")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_directory_is_created_writable_by_every_user(hv: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "data" / "ns" / "name-uid"
    assert hv.prepare(path, [tmp_path]) == "created"
    assert mode(path) == 0o777
    assert mode(path.parent) == 0o755  # the parents are not opened


def test_an_empty_directory_kubelet_made_first_is_opened(hv: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "made-by-kubelet"
    path.mkdir(mode=0o755)
    expected = "opened" if os.getuid() == 0 else "in use: left alone"
    assert hv.prepare(path, [tmp_path]) == expected
    assert hv.prepare(path, [tmp_path]) == ("ready" if os.getuid() == 0 else expected)


def test_a_directory_that_holds_files_is_left_as_it_is(hv: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "in-use"
    path.mkdir(mode=0o700)
    (path / "ibdata1").write_text("")
    assert hv.prepare(path, [tmp_path]) == "in use: left alone"
    assert mode(path) == 0o700


def test_paths_outside_the_bases_are_never_touched(hv: ModuleType, tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    assert hv.prepare(tmp_path / "elsewhere", [base]) == "outside the bases: left alone"
    assert hv.prepare(base / ".." / "escape", [base]) == "outside the bases: left alone"
    assert hv.prepare(base, [base]) == "outside the bases: left alone"
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "escape").exists()


def test_a_file_in_place_of_the_directory_is_left_alone(hv: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "a-file"
    path.write_text("x")
    assert hv.prepare(path, [tmp_path]) == "not a directory: left alone"
