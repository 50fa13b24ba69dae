"""Filters over spec.config, the server options of a MySQL object: their problems
(`mysql_config_problems`), the option file the server reads (`mysql_config_cnf`), the part
whose change needs a restart (`mysql_config_restart`) and the statements that apply the rest
to a running server (`mysql_config_live`, `mysql_config_statements`).

What the operator applies live is a fixed table of options (the mysql role's
`mysql_config_live_options`: name -> kind), dynamic on Oracle MySQL 8.4+ and MariaDB 10.11+;
every other option is written to the option file and the server restarts to read it. The
statements are built from the table's own names (never the user's spelling) and from values
checked against their kind: digits, a size turned into bytes, ON/OFF, or a quoted string of
characters that cannot end a literal. Nothing the user wrote reaches SQL unchecked.

Python, not Jinja, because each rule is one `if` with its message and the unit tests
(tests/unit/test_mysql_config.py) pin the messages and the statements.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

# The CRD's patterns and refusals (deploy/crd.yml), repeated for runs without it in front.
KEY = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
VALUE = re.compile(r"^[A-Za-z0-9_.,:/+@%*=-]{0,256}$")
# Options the operator sets itself (where the server listens, its files, its accounts), or
# that would run code or SQL the user wrote (init files, plugins). An option may be spelt
# with '-' or '_' and carry MySQL's prefixes (loose-, skip-, enable-, disable-, maximum-).
MANAGED = re.compile(
    r"^((loose|skip|enable|disable|maximum)[-_])*("
    r"datadir|basedir|socket|port|bind[-_]address|user|networking|grant[-_]tables|pid[-_]file"
    r"|mysqlx[-_]socket|secure[-_]file[-_]priv|plugin[-_]dir|plugin[-_]load([-_]add)?"
    r"|early[-_]plugin[-_]load|init[-_]connect|init[-_]file|init[-_]slave|init[-_]replica"
    r")$")
MAX_OPTIONS = 64
_SIZE = re.compile(r"^([0-9]+)([KMGkmg]?)$")
_IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_INTEGER = re.compile(r"^[0-9]+$")
_NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_BOOLEANS = {"on": "ON", "1": "ON", "true": "ON", "off": "OFF", "0": "OFF", "false": "OFF"}
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_KINDS = {
    "integer": "a whole number such as 200",
    "size": "a number of bytes, optionally with K, M or G (64M)",
    "number": "a number such as 0.5",
    "boolean": "ON or OFF",
    "text": "text",
}


def canonical(key: Any) -> str:
    """An option's name as the server knows it: '-' and '_' are the same to it."""
    return str(key).replace("-", "_")


def _value(kind: str, value: Any) -> str | None:
    """``value`` as an SQL literal of ``kind``, or None when it is not one."""
    text = str(value)
    if kind == "integer":
        return text if _INTEGER.match(text) else None
    if kind == "size":
        found = _SIZE.match(text)
        return str(int(found[1]) * _UNITS[found[2].lower()]) if found else None
    if kind == "number":
        return text if _NUMBER.match(text) else None
    if kind == "boolean":
        word = _BOOLEANS.get(text.lower())
        return f"'{word}'" if word else None
    return f"'{text}'" if VALUE.match(text) else None  # no quote or backslash can be in it


# What spec.backup.pointInTime adds to the server's options: binary logs named mysql-bin in
# the data directory (MariaDB writes none by default; Oracle MySQL's are named binlog), in ROW
# format (MariaDB's default is MIXED), kept 7 days (MariaDB's default is for ever). `loose-`:
# a server that has dropped an option warns instead of refusing to start.
ARCHIVE_OPTIONS = {
    "log-bin": "mysql-bin",
    "loose-binlog-format": "ROW",
    "loose-binlog-expire-logs-seconds": "604800",
}
_BINLOG = re.compile(r"^((loose|skip|enable|disable)_)*"
                     r"(log_bin(_index|_basename)?|binlog_format|sql_log_bin)$")


def server_options(config: Any, archive: Any) -> dict[str, Any]:
    """The options the server is given: spec.config, and ARCHIVE_OPTIONS when its binary
    logs are archived (``archive`` true)."""
    options = dict(config) if isinstance(config, dict) else {}
    return {**options, **ARCHIVE_OPTIONS} if archive else options


def config_problems(config: Any, live_options: Any, archive: Any = False) -> list[str]:
    """Every problem of spec.config, each naming its option; [] when there is none. With
    ``archive`` (spec.backup.pointInTime), the binary-log options are the operator's."""
    if not config:
        return []
    if not isinstance(config, dict):
        return ["spec.config: must be a map of server option names to values."]
    owned = ", ".join(f"{k} = {v}" for k, v in ARCHIVE_OPTIONS.items())
    problems = [f"spec.config.{key}: spec.backup.pointInTime sets the binary-log options itself"
                f" ({owned}); it cannot be set with it."
                for key in config if archive and _BINLOG.match(canonical(key))]
    if len(config) > MAX_OPTIONS:
        problems.append(f"spec.config: at most {MAX_OPTIONS} options (got {len(config)}).")
    seen: dict[str, str] = {}
    for key, value in config.items():
        field = f"spec.config.{key}"
        if not KEY.match(str(key)):
            problems.append(f"{field}: an option name is lower-case letters, digits, '_' and '-',"
                            " starting with a letter, at most 64 characters.")
            continue
        if MANAGED.match(str(key)):
            problems.append(f"{field}: the operator manages this option, or it would run code or"
                            " SQL given here; it cannot be set.")
            continue
        name = canonical(key)
        if name in seen:
            problems.append(f"{field}: the same option as spec.config.{seen[name]} ('-' and '_'"
                            " are the same to the server).")
        seen[name] = str(key)
        shaped = isinstance(value, (str, int)) and not isinstance(value, bool)
        if not shaped or not VALUE.match(str(value)):
            problems.append(f"{field}: a value is a string or a whole number of at most 256"
                            " letters, digits and _ . , : / + @ % * = - (no spaces or quotes).")
            continue
        kind = (live_options or {}).get(name)
        if kind and _value(kind, value) is None:
            problems.append(f"{field}: '{value}' is not {_KINDS[kind]}.")
    return problems


def config_cnf(config: Any) -> str:
    """The option file of spec.config (read by the server from its conf.d), sorted by name;
    an empty value writes the bare option (skip-log-bin)."""
    lines = ["# spec.config of the MySQL object, written by the operator.", "[mysqld]"]
    for key in sorted(config or {}, key=str):
        value = str((config or {})[key])
        lines.append(f"{key} = {value}" if value else str(key))
    return "\n".join(lines) + "\n"


def config_live(config: Any, live_options: Any) -> dict[str, str]:
    """The options of spec.config the operator applies to a running server, by canonical
    name, with their values as written (text: equal dicts mean equal settings)."""
    table = live_options or {}
    options = sorted((config or {}).items(), key=lambda kv: str(kv[0]))
    return {canonical(k): str(v) for k, v in options if canonical(k) in table}


def _record(value: Any) -> dict[str, str]:
    """A record of live options: a dict, or its JSON text as an annotation holds it."""
    if isinstance(value, str):
        try:
            value = json.loads(value or "{}")
        except ValueError:
            return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def config_restart(config: Any, live_options: Any) -> str:
    """A digest of the options a running server cannot take (all but the live ones): it
    changes, and the server's pod template with it, exactly when they do."""
    table = live_options or {}
    rest = {canonical(k): str(v) for k, v in (config or {}).items() if canonical(k) not in table}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()[:16]


def config_applied(config_map: Any, deployment: Any, *, live: Any, restart: str, applied_key: str,
                   restart_key: str) -> dict[str, str]:
    """What the running server has of the live options (as `config_live`): the config map's
    record, unless the server starts with this run's option file and reads them there (no
    config map yet, no Deployment yet, or a pod template with another restart digest, which
    this run replaces and so restarts the server)."""
    annotations = ((config_map or {}).get("metadata") or {}).get("annotations") or {}
    template = (((deployment or {}).get("spec") or {}).get("template") or {})
    pod_annotations = (template.get("metadata") or {}).get("annotations") or {}
    if not config_map or pod_annotations.get(restart_key) != restart:
        return _record(live)
    return _record(annotations.get(applied_key, "{}"))


def config_record(live: Any) -> str:
    """The config map's annotation text of a record of live options: sorted JSON."""
    return json.dumps(_record(live), sort_keys=True, separators=(",", ":"))


def config_statements(live: Any, applied: Any, live_options: Any) -> str:
    """SET GLOBAL statements taking a running server from the live options ``applied`` to
    ``live`` (both as `config_live`): each option of ``live`` set to its value, each one
    only in ``applied`` back to the server's default. Names come from the table."""
    table = live_options or {}
    wanted, had = _record(live), _record(applied)
    statements = []
    for name in sorted(table):
        if not _IDENTIFIER.match(name) or table[name] not in _KINDS:
            raise ValueError(f"mysql_config_live_options: {name!r}: {table[name]!r} is not an"
                             f" option name and one of {', '.join(_KINDS)}")
        if name in wanted:
            literal = _value(table[name], wanted[name])
            if literal is None:  # config_problems refused it before any run got here
                raise ValueError(f"spec.config.{name}: not {_KINDS[table[name]]}")
            statements.append(f"SET GLOBAL {name} = {literal};")
        elif name in had:
            statements.append(f"SET GLOBAL {name} = DEFAULT;")
    return "\n".join(statements) + ("\n" if statements else "")


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_config_problems": config_problems,
            "mysql_server_options": server_options,
            "mysql_config_cnf": config_cnf,
            "mysql_config_live": config_live,
            "mysql_config_restart": config_restart,
            "mysql_config_applied": config_applied,
            "mysql_config_record": config_record,
            "mysql_config_statements": config_statements,
        }
