"""The CustomResourceDefinitions as written (no cluster): every key one the API server knows,
every schema structural, and the CEL validation rules in a form every supported server takes.

An API server drops the keys of a CRD it does not know, silently: a misspelt key (a
`x-kubernetes-validation`, a `maxlength`) would leave a field unchecked without a word. The
rules are limited to `rule` and `message` (the keys of servers from 1.23; a newer key makes a
1.25 to 1.27 server's strict field validation refuse the whole file) and only read strings
of bounded length (their estimated cost stays under the API server's limit). Whether each
rule refuses what it should is tests/integration/test_bad_input.py's (a current cluster)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DIRECTORIES = ("deploy", "examples", "molecule", "bench")

# apiextensions.k8s.io/v1 field names, each level of the CRD object
CRD_KEYS = {"apiVersion", "kind", "metadata", "spec"}
SPEC_KEYS = {"group", "names", "scope", "versions", "conversion", "preserveUnknownFields"}
NAMES_KEYS = {"plural", "singular", "shortNames", "kind", "listKind", "categories"}
VERSION_KEYS = {"name", "served", "storage", "deprecated", "deprecationWarning", "schema",
                "subresources", "additionalPrinterColumns", "selectableFields"}
SUBRESOURCES_KEYS = {"status", "scale"}
COLUMN_KEYS = {"name", "type", "format", "description", "priority", "jsonPath"}
# JSONSchemaProps keys a CRD schema may carry ($ref, definitions, dependencies,
# patternProperties, additionalItems, id and $schema are refused in a CRD, or mean nothing)
SCHEMA_KEYS = {
    "type", "format", "title", "description", "default", "example", "externalDocs", "nullable",
    "enum", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties",
    "maxProperties", "required", "properties", "additionalProperties", "items",
    "allOf", "anyOf", "oneOf", "not",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type", "x-kubernetes-validations",
}
JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
# what a structural schema forbids inside a junctor (value validations only there)
NOT_IN_JUNCTORS = {"type", "description", "title", "default", "nullable", "additionalProperties"}
TYPES = {"object", "array", "string", "integer", "number", "boolean"}
RULE_KEYS = {"rule", "message"}


def crds() -> Iterator[tuple[str, dict[str, Any]]]:
    for directory in DIRECTORIES:
        for path in sorted((REPO / directory).rglob("*.y*ml")):
            text = path.read_text()
            if "CustomResourceDefinition" not in text:
                continue
            for doc in yaml.safe_load_all(text):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    yield f"{path.relative_to(REPO)}:{doc['metadata']['name']}", doc


CRDS = dict(crds())


def test_the_crds_are_found() -> None:
    assert {"mysqls.otus.homework", "mysqlbackups.otus.homework", "mysqlrestores.otus.homework",
            "databases.zalando.org", "appservices.app.example.com"} <= {
        doc["metadata"]["name"] for doc in CRDS.values()}, sorted(CRDS)


def unknown(node: dict[str, Any], known: set[str], where: str) -> list[str]:
    return [f"{where}: unknown key {key!r}" for key in sorted(set(node) - known)]


def schema_problems(node: Any, where: str, *, in_junctor: bool = False) -> list[str]:
    """What makes `node` (and what it holds) not a structural schema, or not one this
    repository's servers all read the same way."""
    if not isinstance(node, dict):
        return [f"{where}: a schema must be a mapping, got {node!r}"]
    problems = unknown(node, SCHEMA_KEYS, where)
    if in_junctor:
        problems += [f"{where}: {key!r} inside {'/'.join(JUNCTORS)}" for key in sorted(node)
                     if key in NOT_IN_JUNCTORS or key.startswith("x-kubernetes-")]
    else:
        loose = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        if node.get("type") not in TYPES and not (loose and "type" not in node):
            problems.append(f"{where}: type must be one of {sorted(TYPES)}, got {node.get('type')!r}")
    if node.get("uniqueItems") is True:
        problems.append(f"{where}: uniqueItems: true is refused")
    if "properties" in node and node.get("additionalProperties") not in (None, False):
        problems.append(f"{where}: properties and additionalProperties together")
    problems += children_problems(node, where, in_junctor=in_junctor)
    return problems if in_junctor else problems + rule_problems(node, where)


def children_problems(node: dict[str, Any], where: str, *, in_junctor: bool) -> list[str]:
    problems = []
    for name, sub in (node.get("properties") or {}).items():
        problems += schema_problems(sub, f"{where}.{name}", in_junctor=in_junctor)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            problems += schema_problems(node[key], f"{where}.{key}", in_junctor=in_junctor)
    for key in JUNCTORS:
        for i, sub in enumerate(node[key] if isinstance(node.get(key), list) else [node.get(key)]):
            if sub is not None:
                problems += schema_problems(sub, f"{where}.{key}[{i}]", in_junctor=True)
    return problems


def rule_problems(node: dict[str, Any], where: str) -> list[str]:
    rules = node.get("x-kubernetes-validations")
    if rules is None:
        return []
    if not isinstance(rules, list) or not rules:
        return [f"{where}: x-kubernetes-validations must be a list of rules"]
    problems = []
    for i, rule in enumerate(rules):
        at = f"{where}.x-kubernetes-validations[{i}]"
        if not isinstance(rule, dict):
            problems.append(f"{at}: a rule must be a mapping")
            continue
        problems += unknown(rule, RULE_KEYS, at)
        if not isinstance(rule.get("rule"), str) or not rule["rule"].strip():
            problems.append(f"{at}: rule must be a CEL expression")
        elif re.search(r"has\([^()]*\)\s*[!=]=|[!=]=\s*!?has\(", rule["rule"]):
            # a 1.25 server's cost estimate of == or != on has() results is unbounded: it
            # refuses the whole CRD (a conditional, a ? b : c, says the same)
            problems.append(f"{at}: == or != between has() results")
        message = rule.get("message")
        if not isinstance(message, str) or not message or "\n" in message:
            problems.append(f"{at}: message must be one line (and is what the user reads)")
        elif not re.search(r"\b(spec|status|metadata)\b", message):
            problems.append(f"{at}: the message must name the field ({message!r})")
    problems += unbounded(node, where)
    return problems


def unbounded(node: dict[str, Any], where: str) -> list[str]:
    """Strings, lists and maps under a node with rules that have no maximum size: the API
    server estimates a rule's cost from those maxima and refuses a CRD whose rules could
    cost too much (an unbounded string in a rule is the usual way to get there)."""
    found = []
    kind = node.get("type")
    if kind == "string" and "maxLength" not in node and "enum" not in node:
        found.append(f"{where}: a string under a CEL rule needs maxLength")
    if kind == "array" and "maxItems" not in node:
        found.append(f"{where}: a list under a CEL rule needs maxItems")
    if kind == "object" and isinstance(node.get("additionalProperties"), dict) and "maxProperties" not in node:
        found.append(f"{where}: a map under a CEL rule needs maxProperties")
    if node.get("x-kubernetes-preserve-unknown-fields") and "maxProperties" not in node:
        # passed-through objects (a pod's affinity) are bounded at their top; the rules above
        # them read other fields and never iterate into them
        found.append(f"{where}: unknown fields under a CEL rule have no bound")
    for name, sub in (node.get("properties") or {}).items():
        found += unbounded(sub, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            found += unbounded(node[key], f"{where}.{key}")
    return found


def metadata_problems(schema: dict[str, Any], where: str) -> list[str]:
    """At the root, metadata may say only type: object and restrict name and generateName."""
    metadata = (schema.get("properties") or {}).get("metadata")
    if metadata is None:
        return []
    problems = unknown(metadata, {"type", "properties"}, f"{where}.metadata")
    if metadata.get("type") != "object":
        problems.append(f"{where}.metadata: type must be object")
    problems += unknown(metadata.get("properties") or {}, {"name", "generateName"}, f"{where}.metadata.properties")
    for name, sub in (metadata.get("properties") or {}).items():
        if sub.get("type") != "string":
            problems.append(f"{where}.metadata.{name}: type must be string")
    return problems


def default_problems(node: Any, where: str) -> list[str]:
    """A default the field's own validation would refuse (the API server refuses the CRD)."""
    if not isinstance(node, dict):
        return []
    problems = []
    if "default" in node:
        value = node["default"]
        expected = {"string": str, "integer": int, "boolean": bool, "object": dict, "array": list}.get(node.get("type", ""))
        if expected is not None and not isinstance(value, expected):
            problems.append(f"{where}: default {value!r} is not a {node['type']}")
        elif isinstance(value, str):
            if "pattern" in node and not re.search(node["pattern"], value):
                problems.append(f"{where}: default {value!r} does not match {node['pattern']!r}")
            if not node.get("minLength", 0) <= len(value) <= node.get("maxLength", len(value)):
                problems.append(f"{where}: default {value!r} is outside minLength/maxLength")
        if "enum" in node and value not in node["enum"]:
            problems.append(f"{where}: default {value!r} is not in the enum")
    for name, sub in (node.get("properties") or {}).items():
        problems += default_problems(sub, f"{where}.{name}")
    if isinstance(node.get("items"), dict):
        problems += default_problems(node["items"], f"{where}.items")
    return problems


@pytest.mark.parametrize("where", sorted(CRDS))
def test_every_key_is_known_and_every_schema_structural(where: str) -> None:
    crd = CRDS[where]
    problems = unknown(crd, CRD_KEYS, where)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1", where
    spec = crd["spec"]
    problems += unknown(spec, SPEC_KEYS, f"{where}.spec")
    problems += unknown(spec["names"], NAMES_KEYS, f"{where}.spec.names")
    assert spec["versions"], where
    for version in spec["versions"]:
        at = f"{where}.spec.versions[{version['name']}]"
        problems += unknown(version, VERSION_KEYS, at)
        problems += unknown(version.get("subresources") or {}, SUBRESOURCES_KEYS, f"{at}.subresources")
        for column in version.get("additionalPrinterColumns") or []:
            problems += unknown(column, COLUMN_KEYS, f"{at}.additionalPrinterColumns[{column.get('name')}]")
        problems += unknown(version["schema"], {"openAPIV3Schema"}, f"{at}.schema")
        schema = version["schema"]["openAPIV3Schema"]
        if schema.get("type") != "object":
            problems.append(f"{at}: the root schema must be of type object")
        problems += schema_problems(schema, f"{at}.schema")
        problems += metadata_problems(schema, f"{at}.schema")
        problems += default_problems(schema, f"{at}.schema")
    assert problems == []


def test_a_misspelt_or_unbounded_schema_is_caught() -> None:
    """The checks themselves: what each of them is there to find."""
    bad = {"type": "object", "properties": {
        "a": {"type": "string", "maxlength": 3},
        "b": {"x-kubernetes-validation": [{"rule": "self.size() < 3"}]},
        "b2": {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}},
               "x-kubernetes-validations": [{"rule": "has(self.s) == has(oldSelf.s)", "message": "spec.b2.s"}]},
        "c": {"type": "object", "properties": {"s": {"type": "string"}},
              "x-kubernetes-validations": [{"rule": "self.s == oldSelf.s", "message": "spec.c.s is fixed",
                                            "fieldPath": ".s"}]},
        "d": {"type": "object", "oneOf": [{"required": ["x"], "description": "no"}]},
        "e": {"type": "string", "default": "X", "pattern": "^[a-z]+$"},
    }}
    problems = " ".join(schema_problems(bad, "bad") + default_problems(bad, "bad"))
    for expected in ("bad.a: unknown key 'maxlength'", "bad.b: unknown key 'x-kubernetes-validation'",
                     "bad.b: type must be", "unknown key 'fieldPath'", "bad.c.s: a string under a CEL rule",
                     "bad.d.oneOf[0]: 'description' inside", "bad.e: default 'X' does not match",
                     "bad.b2.x-kubernetes-validations[0]: == or != between has() results"):
        assert expected in problems, (expected, problems)


def test_the_mysql_kinds_carry_their_cel_rules() -> None:
    """The rules test_bad_input.py exercises are where it expects them (a rule moved or
    dropped would otherwise only show on a current cluster)."""
    docs = {doc["metadata"]["name"]: doc for doc in CRDS.values()}

    def rules(crd: str, *path: str) -> list[str]:
        node = docs[crd]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for name in path:
            node = node["properties"][name]
        return [r["rule"] for r in node.get("x-kubernetes-validations", [])]

    mysql = rules("mysqls.otus.homework", "spec")
    assert any("oldSelf.storage_class" in r for r in mysql), mysql
    assert any("has(self.passwordSecretRef)" in r for r in mysql), mysql
    assert rules("mysqls.otus.homework", "spec", "database") == ["self.replace('_', '__').size() <= 64"]
    assert "self == oldSelf" in rules("mysqlbackups.otus.homework", "spec")
    assert "self == oldSelf" in rules("mysqlrestores.otus.homework", "spec")


# --- no string a Job's command line gets can read as an option ------------------------------

# What a client (mysql, mysqldump) in a Job would read as an option of its own: -h<address>
# sends the Job's root login elsewhere, -e<statement> runs a statement as root; a leading '-'
# on any name, file, or setting. No pattern of the three kinds admits any of them.
OPTION_FORMS = ["-hevil", "-eSHUTDOWN", "--init-command=x", "-", "--", "-x.sql", "-1", "-1 * * * *",
                "-http://x", "--help"]
# every string field of the three kinds with a pattern, and values a server takes, each of which
# must stay admitted (and, with a '-' put in front, be refused)
LEGAL = {
    "MySQL": {
        "metadata.name": ["db", "a-1"],
        "spec.image": ["mysql:8.4", "registry.local:5000/team/mysql@sha256:0123abcd", "9ab/x:1"],
        "spec.database": ["app", "db-name", "$otus-db", "_x", "A$b_c-1", "d" * 64],
        "spec.passwordSecretRef.name": ["db-password", "a.b"],
        "spec.resources.requests.cpu": ["500m", "2"], "spec.resources.requests.memory": ["512Mi"],
        "spec.resources.limits.cpu": ["1.5"], "spec.resources.limits.memory": ["1Gi"],
        "spec.priorityClassName": ["high"],
        "spec.podLabels.*": ["team-a", "x"],
        "spec.storage_size": ["1Gi", "500M"],
        "spec.storage_class": ["fast-ssd"],
        "spec.restore_from": ["latest", "none", "db-1", "db-20260101T000000Z.sql", "_x.sql", "2026-11-27T16:04:05Z"],
        "spec.backup.schedule": ["0 3 * * *", "*/5 * * * *", "@daily", "0 0 * * mon-fri", "0 0 ? * *"],
        "spec.backup.s3.endpoint": ["https://s3.eu-west-1.amazonaws.com", "http://seaweedfs:8333/"],
        "spec.backup.s3.bucket": ["backups", "b.1"],
        "spec.backup.s3.prefix": ["team/db", "_x/a-b.c", "x"],
        "spec.backup.s3.region": ["us-east-1", "garage"],
        "spec.backup.s3.credentialsSecret": ["s3-creds"],
        "spec.backup.encryptionSecret": ["backup-key"],
    },
    "MySQLBackup": {
        "metadata.name": ["bk-1", "0a"],
        "spec.instance": ["db"],
        "spec.file": ["db-20260101T000000Z.sql", "bk-1.sql", "_x.sql"],
        "spec.job": ["db-bk-29000000"],
        "spec.image": ["mysql:8.4", "mariadb:11.4"],
        "spec.database": ["app", "db-name", "$otus-db"],
    },
    "MySQLRestore": {
        "metadata.name": ["r-1"],
        "spec.instance": ["db"],
        "spec.backup": ["db-older", "a.b"],
        "spec.pointInTime": ["2026-11-27T16:04:05Z", "2026-11-27T16:04:05.5+02:00"],
    },
}
# string fields with a pattern that may start with '-': none of them reaches a command line
MAY_START_WITH_A_DASH = {
    # a Secret's key ('-a' is one); the role reads the Secret's value by it, through the API
    ("MySQL", "spec.passwordSecretRef.key"),
    # a server option's value: written to the option file (name = value) and, for the options
    # applied live, checked by kind and quoted in SET GLOBAL; never an argument
    ("MySQL", "spec.config.*"),
}
# string fields without a pattern: none of them reaches a command line either
UNPATTERNED = {
    ("MySQL", "spec.password"),  # to the server in MYSQL_PWD (environment) and SQL literals only
    ("MySQL", "spec.nodeSelector.*"), ("MySQL", "spec.tolerations[].key"), ("MySQL", "spec.tolerations[].value"),
    ("MySQL", "spec.service.annotations.*"), ("MySQL", "spec.podAnnotations.*"),  # the API's, as written
}


def string_fields(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every string (or int-or-string) field under a schema, as a dotted path (`*`: a map's
    values, `[]`: a list's items), the status and the kinds' own apiVersion and kind left out."""
    if not isinstance(node, dict) or path in {".status", ".apiVersion", ".kind"}:
        return
    if (node.get("type") == "string" or node.get("x-kubernetes-int-or-string")) and "enum" not in node:
        yield path.lstrip("."), node
    for name, sub in (node.get("properties") or {}).items():
        yield from string_fields(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from string_fields(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from string_fields(node["additionalProperties"], f"{path}.*")


def mysql_kinds() -> dict[str, dict[str, dict[str, Any]]]:
    docs = {doc["metadata"]["name"]: doc for doc in CRDS.values() if doc["spec"]["group"] == "otus.homework"}
    return {doc["spec"]["names"]["kind"]: dict(string_fields(doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]))
            for doc in docs.values()}


def admits(node: dict[str, Any], value: str) -> bool:
    """Whether the API server admits ``value`` by the field's pattern and lengths (RE2 and
    Python's re agree on these patterns; `$` is the end of the text to RE2)."""
    return (re.search(node["pattern"], value) is not None and "\n" not in value
            and node.get("minLength", 0) <= len(value) <= node.get("maxLength", len(value)))


def test_every_string_field_of_the_mysql_kinds_is_classified() -> None:
    """A new string field must say here whether it can reach a command line."""
    found = {(kind, path) for kind, fields in mysql_kinds().items() for path in fields}
    patterned = {(kind, path) for kind, fields in LEGAL.items() for path in fields} | MAY_START_WITH_A_DASH
    assert found == patterned | UNPATTERNED
    for kind, path in UNPATTERNED:
        assert "pattern" not in mysql_kinds()[kind][path], (kind, path)


@pytest.mark.parametrize(("kind", "path"), sorted((k, p) for k, fields in LEGAL.items() for p in fields))
def test_no_pattern_admits_an_option(kind: str, path: str) -> None:
    node = mysql_kinds()[kind][path]
    for value in LEGAL[kind][path]:
        assert admits(node, value), (kind, path, value)
        assert not admits(node, "-" + value), (kind, path, "-" + value)
    for value in OPTION_FORMS:
        assert not admits(node, value), (kind, path, value)


def test_a_database_name_the_server_takes_and_the_options_are_told_apart() -> None:
    """spec.database of a MySQL and of a MySQLBackup: the same pattern, no leading '-', and
    every other character of a name the servers take ('$' included, first or not)."""
    kinds = mysql_kinds()
    assert kinds["MySQL"]["spec.database"]["pattern"] == kinds["MySQLBackup"]["spec.database"]["pattern"]
    node = kinds["MySQL"]["spec.database"]
    for value in ["$", "_", "a-", "a--b", "0"]:
        assert admits(node, value), value
    for value in ["-hevil", "-eSHUTDOWN", "--init-command=x", "-h10.0.0.1", "-P3306"]:
        assert not admits(node, value), value
