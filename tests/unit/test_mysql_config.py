"""mysql_common's filter_plugins/mysql_config.py: what spec.config refuses and why, the
option file the server reads, the digest that restarts it, and the statements that give a
running server the options it takes live."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests import sources

REPO = Path(__file__).resolve().parents[2]
config = sources.load(REPO / "roles/mysql_common/filter_plugins/mysql_config.py", "mysql_config")
LIVE = yaml.safe_load((REPO / "roles/mysql/defaults/main.yml").read_text())["mysql_config_live_options"]


def crd_config_schema() -> dict:
    mysql = next(d for d in yaml.safe_load_all((REPO / "deploy/crd.yml").read_text()) if d["spec"]["names"]["kind"] == "MySQL")
    return mysql["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["config"]


def test_good_options_have_no_problem() -> None:
    assert config.config_problems({}, LIVE) == []
    assert config.config_problems(None, LIVE) == []
    assert config.config_problems({
        "max_connections": 200, "innodb-buffer-pool-size": "256M", "long_query_time": "0.5",
        "slow_query_log": "ON", "sql_mode": "STRICT_TRANS_TABLES,NO_ZERO_DATE", "performance_schema": "OFF",
        "skip-log-bin": "", "time_zone": "+00:00"}, LIVE) == []


@pytest.mark.parametrize("key", [
    "port", "socket", "datadir", "bind-address", "bind_address", "user", "skip-networking",
    "skip_grant_tables", "loose-init-file", "init_connect", "plugin-load-add", "loose_skip_grant_tables",
    "secure-file-priv", "pid-file", "early-plugin-load", "init-replica"])
def test_options_the_operator_manages_or_that_run_code_are_refused(key: str) -> None:
    assert config.config_problems({key: "x"}, LIVE) == [
        f"spec.config.{key}: the operator manages this option, or it would run code or SQL given here;"
        " it cannot be set."]


def test_names_that_only_contain_a_managed_one_are_allowed() -> None:
    assert config.config_problems({"report_port": 3307, "ssl-ca": "/x", "log_user": "x"}, LIVE) == []


@pytest.mark.parametrize("key", ["Max_Connections", "1abc", "a b", "x" * 65, "max_connections;", "имя"])
def test_option_names_are_refused_naming_them(key: str) -> None:
    [problem] = config.config_problems({key: "1"}, LIVE)
    assert problem.startswith(f"spec.config.{key}: an option name is")


@pytest.mark.parametrize("value", ["a'b", 'a"b', "a b", "a\nb", "a\\b", "$(touch /tmp/x)", "{{ 7*7 }}",
                                   "x;y", "#x", "v" * 257, True, 1.5, ["a"], {"a": 1}])
def test_values_are_refused_naming_the_option(value: object) -> None:
    [problem] = config.config_problems({"ft_stopword_file": value}, LIVE)
    assert problem.startswith("spec.config.ft_stopword_file: a value is a string or a whole number")


@pytest.mark.parametrize(("key", "value", "kind"), [
    ("max_connections", "many", "a whole number such as 200"),
    ("max_connections", "-1", "a whole number such as 200"),
    ("max_allowed_packet", "64MB", "a number of bytes, optionally with K, M or G (64M)"),
    ("long_query_time", "1e3", "a number such as 0.5"),
    ("slow_query_log", "maybe", "ON or OFF"),
])
def test_live_options_take_only_values_of_their_kind(key: str, value: str, kind: str) -> None:
    assert config.config_problems({key: value}, LIVE) == [f"spec.config.{key}: '{value}' is not {kind}."]


def test_the_same_option_twice_is_refused() -> None:
    assert config.config_problems({"max-connections": 1, "max_connections": 2}, LIVE) == [
        "spec.config.max_connections: the same option as spec.config.max-connections ('-' and '_' are"
        " the same to the server)."]


def test_the_option_file_lists_the_options_sorted() -> None:
    assert config.config_cnf({"sql_mode": "ANSI", "max_connections": 10, "skip-log-bin": ""}) == (
        "# spec.config of the MySQL object, written by the operator.\n[mysqld]\n"
        "max_connections = 10\nskip-log-bin\nsql_mode = ANSI\n")
    assert config.config_cnf({}) == "# spec.config of the MySQL object, written by the operator.\n[mysqld]\n"


def test_only_options_a_running_server_cannot_take_change_the_restart_digest() -> None:
    base = config.config_restart({"performance_schema": "OFF", "max_connections": 10}, LIVE)
    assert config.config_restart({"performance_schema": "OFF", "max_connections": 500}, LIVE) == base
    assert config.config_restart({"performance_schema": "OFF"}, LIVE) == base
    assert config.config_restart({"performance-schema": "OFF"}, LIVE) == base
    assert config.config_restart({"performance_schema": "ON"}, LIVE) != base
    assert config.config_restart({}, LIVE) != base


def test_statements_set_the_live_options_and_reset_the_removed_ones() -> None:
    live = config.config_live({"max-connections": 300, "max_allowed_packet": "64M", "slow_query_log": "true",
                               "long_query_time": "0.25", "sql_mode": "ANSI,STRICT_ALL_TABLES",
                               "performance_schema": "OFF"}, LIVE)
    assert live == {"max_connections": "300", "max_allowed_packet": "64M", "slow_query_log": "true",
                                "long_query_time": "0.25", "sql_mode": "ANSI,STRICT_ALL_TABLES"}
    assert config.config_statements(live, {"wait_timeout": "60", "max_connections": "10"}, LIVE) == (
        "SET GLOBAL long_query_time = 0.25;\n"
        "SET GLOBAL max_allowed_packet = 67108864;\n"
        "SET GLOBAL max_connections = 300;\n"
        "SET GLOBAL slow_query_log = 'ON';\n"
        "SET GLOBAL sql_mode = 'ANSI,STRICT_ALL_TABLES';\n"
        "SET GLOBAL wait_timeout = DEFAULT;\n")
    assert config.config_statements({}, "{}", LIVE) == ""


def test_the_statements_never_take_a_name_outside_the_table() -> None:
    with pytest.raises(ValueError, match="is not an option name"):
        config.config_statements({}, {}, {"x; DROP TABLE t": "integer"})


def test_what_the_server_has_is_the_record_unless_it_restarts_with_the_option_file() -> None:
    keys = {"applied_key": "a/applied", "restart_key": "a/restart"}
    record = {"metadata": {"annotations": {"a/applied": '{"max_connections":"10"}'}}}
    running = {"spec": {"template": {"metadata": {"annotations": {"a/restart": "d1"}}}}}
    assert config.config_applied(record, running, live={"max_connections": "20"}, restart="d1", **keys) == {
        "max_connections": "10"}
    # a restart-only change, a new instance, a pod template from before spec.config: all restart
    live = {"max_connections": "20"}
    for config_map, deployment, restart in ((record, running, "d2"), ({}, running, "d1"), (record, {}, "d1"),
                                            (record, {"spec": {"template": {"metadata": {}}}}, "d1")):
        assert config.config_applied(config_map, deployment, live=live, restart=restart, **keys) == live


def test_the_record_is_sorted_json_and_a_broken_one_is_empty() -> None:
    assert config.config_record({"b": 2, "a": "1"}) == '{"a":"1","b":"2"}'
    assert config.config_record('{"a": "1"}') == '{"a":"1"}'
    assert config.config_record("not json") == "{}"


def test_the_crd_refuses_what_the_filter_refuses() -> None:
    schema = crd_config_schema()
    assert schema["additionalProperties"]["pattern"] == config.VALUE.pattern
    assert schema["maxProperties"] == config.MAX_OPTIONS
    rules = " ".join(r["rule"] for r in schema["x-kubernetes-validations"])
    assert config.KEY.pattern in rules and config.MANAGED.pattern in rules


def test_the_crd_names_every_live_option() -> None:
    description = " ".join(crd_config_schema()["description"].split())
    assert all(name in description for name in LIVE), [n for n in LIVE if n not in description]


def test_archived_binary_logs_add_their_options_and_take_them_from_spec_config() -> None:
    options = config.server_options({"max_connections": 50}, 30)
    assert options == {"max_connections": 50, **config.ARCHIVE_OPTIONS}
    assert config.server_options({"max_connections": 50}, 0) == {"max_connections": 50}
    assert "log-bin = mysql-bin" in config.config_cnf(options)
    assert config.config_problems({"skip-log-bin": "", "binlog_format": "MIXED"}, LIVE) == []
    problems = config.config_problems({"skip-log-bin": "", "binlog_format": "MIXED", "max_connections": 9}, LIVE, 30)
    assert [p.split(":")[0] for p in problems] == ["spec.config.skip-log-bin", "spec.config.binlog_format"]
