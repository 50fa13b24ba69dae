"""The warnings of the API server (and kubectl's own) seen in this test session, which make
it fail (tests/conftest.py).

Where they are seen:

* kubectl's stderr (:meth:`tests.harness.Cluster.kubectl`): the lines that start with
  ``Warning:`` and carry a deprecation or field warning (:data:`API_TEXTS`) or a Pod
  Security warning ("would violate PodSecurity"). kubectl prints each ``Warning`` header
  the API server answered with so; its own warnings (an apply to an object without the
  last-applied annotation, an immediate deletion) say nothing about the API and are not
  recorded.
* an operator's log, when a test stops the operator (tests/integration/operator_harness.py):
  the lines the operator's API proxy writes for a warning the API server answered a run's
  request with (``[<gvk> <ns>/<name>] API server warning on <METHOD> <path>: <text>``,
  :data:`ansible_kopf.kube.proxy.SERVER_WARNING`) whose text is a deprecation or a field warning
  (:data:`API_TEXTS`). No other line of the log carries the API server's warnings: kopf
  and the ``kubernetes`` client drop those of the operator's own requests, and Ansible's
  ``[WARNING]: `` text (logged with ``ANSIBLE_LOG_EVENTS=Everything`` only) is wrapped to 80
  columns, mixes in Ansible's own warnings and repeats what the proxy logged. The operator's
  other lines that say "deprecated" (an SDK environment variable or flag of an older name)
  are about its configuration, not the API, and are not recorded.

A warning is recorded once per source and text, with how many times it was seen and where
first (the kubectl command, or the log and the request). An xdist worker hands its record to
the controller (:func:`export`, :func:`merge`), as it does the suite figures.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import threading
from collections.abc import Iterable, Sequence

from ansible_kopf.kube import proxy

KUBECTL_PREFIX = "Warning:"  # how kubectl prints a warning, at the start of a line of stderr
# The API server's deprecation and field warnings, e.g. `batch/v1beta1 CronJob is deprecated
# in v1.21+, unavailable in v1.25+; use batch/v1 CronJob`, `spec.nodeSelector[beta.kubernetes.io/os]:
# deprecated since v1.14; use "kubernetes.io/os" instead`, `metadata.annotations[...]:
# non-functional in v1.27+; use the "seccompProfile" field instead`, `unknown field "spec.foo"`,
# `duplicate field "replicas"`.
API_TEXTS = re.compile(r'\bdeprecated\b|\bnon-functional in v\d|\bunknown field "|\bduplicate field "')
POD_SECURITY = "violate PodSecurity"  # `would violate PodSecurity "restricted:latest": ...`
_PROXY_LINE = re.compile(re.escape(proxy.SERVER_WARNING) + r" (?P<request>\S+ \S+): (?P<text>.+)$")
MAX_WHERE = 200  # characters of a command or place shown (a patch's JSON can be long)


@dataclasses.dataclass
class Seen:
    """How often a warning was seen, and where first."""

    count: int
    first: str  # where it was first seen: the kubectl command, or the log and the request


RECORD: dict[tuple[str, str], Seen] = {}  # (source: "kubectl" | "operator", text) -> Seen
_lock = threading.Lock()  # kubectl runs from several threads of a test at once


def kubectl_warnings(stderr: str) -> list[str]:
    """The lines of kubectl's `stderr` that are the API server's deprecation, field or Pod
    Security warnings, as printed."""
    return [line.rstrip() for line in stderr.splitlines()
            if line.startswith(KUBECTL_PREFIX) and (API_TEXTS.search(line) or POD_SECURITY in line)]


def operator_warnings(log: str) -> list[tuple[str, str]]:
    """(request, text) of each API server deprecation or field warning in an operator's log."""
    found = []
    for line in log.splitlines():
        match = _PROXY_LINE.search(line)
        if match is not None and (API_TEXTS.search(match["text"]) or POD_SECURITY in match["text"]):
            found.append((match["request"], match["text"].rstrip()))
    return found


def record(source: str, text: str, where: str, count: int = 1) -> None:
    with _lock:
        seen = RECORD.setdefault((source, text), Seen(0, where[:MAX_WHERE]))
        seen.count += count


def from_kubectl(args: Sequence[str], stderr: str) -> None:
    """Record the warnings kubectl printed when it ran with `args`."""
    for line in kubectl_warnings(stderr):
        record("kubectl", line, shlex.join(["kubectl", *args]))


def from_operator_log(log: str, path: str) -> None:
    """Record the API server warnings in (a part of) the operator log at `path`."""
    for request, text in operator_warnings(log):
        record("operator", text, f"{path} ({request})")


def export() -> list[list[str | int]]:
    """The record as rows [source, text, count, first place] (what xdist can send)."""
    with _lock:
        return [[source, text, seen.count, seen.first] for (source, text), seen in RECORD.items()]


def merge(rows: Iterable[Sequence[str | int]]) -> None:
    """Add a worker's :func:`export`."""
    for source, text, count, first in rows:
        record(str(source), str(text), str(first), int(count))


def report() -> list[str]:
    """One line a warning: source, text, how often, where first; none when none was seen."""
    with _lock:
        return [f"{source}: {text} ({seen.count}x, first: {seen.first})"
                for (source, text), seen in sorted(RECORD.items())]
