"""The availability test's figures (tests/availability.py): its writer's log read back, and
the longest run of failed writes within an operation's window."""

from __future__ import annotations

from tests import availability
from tests.availability import Attempt, Window

LOG = """\
table ready
1 1000 ok pw0
2 1100 ok pw0
3 1200 fail ERROR 2002 (HY000): Can't connect to server on 'avail-ma' (115)
4 1300 fail ERROR 1045 (28000): Access denied for user 'root'@'10.0.0.7' (using password: YES)
5 1500 ok pw1
6 1600 fail timeout (10 s)
7 1700 ok pw1
stopped after 7 attempts
"""


def attempts(*marks: str, step: int = 100) -> list[Attempt]:
    """Attempts 1, 2, ... every `step` ms from 0: "ok" or "fail" each."""
    return [Attempt(i + 1, i * step, mark == "ok") for i, mark in enumerate(marks)]


def test_the_log_is_read_back_in_sequence_order_other_lines_skipped() -> None:
    shuffled = "\n".join(reversed(LOG.splitlines()))
    parsed = availability.parse(shuffled)
    assert [a.seq for a in parsed] == list(range(1, 8))
    assert parsed[2] == Attempt(3, 1200, False, "ERROR 2002 (HY000): Can't connect to server on 'avail-ma' (115)")
    assert parsed[0] == Attempt(1, 1000, True, "pw0")
    assert availability.acknowledged(parsed) == {1, 2, 5, 7}


def test_an_outage_lasts_from_its_first_failure_to_the_next_acknowledged_write() -> None:
    parsed = availability.parse(LOG)
    assert availability.longest_outage(parsed, 0, 10_000) == 0.3  # 1200 -> 1500
    assert availability.longest_outage(parsed, 1500, 10_000) == 0.1  # 1600 -> 1700


def test_no_failure_is_no_outage() -> None:
    assert availability.longest_outage(attempts("ok", "ok", "ok"), 0, 1000) == 0.0
    assert availability.longest_outage([], 0, 1000) == 0.0


def test_a_run_belongs_to_the_window_it_began_in_and_counts_whole() -> None:
    marks = attempts("ok", "fail", "fail", "fail", "ok", "fail", "ok")  # runs at 100-400, 500-600
    assert availability.longest_outage(marks, 0, 200) == 0.3  # began inside, outlasts the window
    assert availability.longest_outage(marks, 200, 500) == 0.0  # under way, began before
    assert availability.longest_outage(marks, 200, 1000) == 0.1


def test_a_run_the_log_ends_in_lasts_to_its_last_failure() -> None:
    assert availability.longest_outage(attempts("ok", "fail", "fail", "fail"), 0, 1000) == 0.2
    assert availability.longest_outage(attempts("fail"), 0, 1000) == 0.0


def test_the_figures_line_names_each_window_and_counts_the_writes() -> None:
    marks = attempts("ok", "fail", "fail", "ok", "ok", "fail", "ok")
    windows = [Window("rotation-by-spec", 0, 400), Window("backup", 400, 800)]
    assert availability.figures_line("mariadb (localhost/mariadb:10.11-bookworm)", marks, windows) == (
        "availability mariadb (localhost/mariadb:10.11-bookworm): rotation-by-spec 0.2 s, backup 0.1 s "
        "(longest run of failed writes within each operation's window; 7 writes, 3 failed)")


def test_writing_is_steady_after_enough_acknowledged_writes_in_a_row() -> None:
    marks = attempts("ok", "ok", "fail", "ok", "ok", "ok")
    assert availability.steady(marks, 0, 3)
    assert not availability.steady(marks, 0, 4)
    assert not availability.steady(marks, 400, 3)  # only 400 and 500 are since then


def test_the_figures_line_is_read_back() -> None:
    windows = [Window("rotation-by-spec", 1000, 1400), Window("backup", 1400, 1800)]
    line = availability.figures_line("mariadb (localhost/mariadb:10.11)", availability.parse(LOG), windows)
    output = f"noise\n{line}\nother\n"
    assert availability.read_figures(output) == {
        "mariadb (localhost/mariadb:10.11)": {"outage_s": {"rotation-by-spec": 0.3, "backup": 0.1},
                                              "writes": 7, "failed": 3}}
    assert availability.read_figures("nothing here") == {}
