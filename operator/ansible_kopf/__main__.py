"""
``python -m ansible_kopf [flags]``: read the Operator SDK's command-line flags, check the
configuration and ``watches.yaml`` before anything else (a bad flag or file ends the
process with a one-line message and exit code 2), then run kopf with the namespaces and
liveness endpoint from the environment (see :mod:`config`).

Each flag is its environment variable's equivalent (:data:`FLAGS`) and wins over it, so the
rest of the operator reads one source. Go's flag syntax: ``--name value``, ``--name=value``,
a boolean alone (``--inject-owner-ref``) or with ``=false``. An unknown flag is an error
that names it.

With ``--leader-elect``, kopf starts only once this process holds the Lease
(:mod:`kube.leader_election`); meanwhile the health probe answers, as a standby replica's
must. Losing the Lease stops the operator (exit code 1); a clean stop releases it.
"""
import contextlib
import http.server
import os
import sys
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

import kopf

from ansible_kopf import config, constants, handlers
from ansible_kopf.kube import client, leader_election
from ansible_kopf.sdk import watches

FLAGS: Final[Mapping[str, str]] = {  # flag: the environment variable it sets
    'watches-file': constants.ENV_WATCHES_FILE,
    'max-concurrent-reconciles': constants.ENV_MAX_CONCURRENT_RECONCILES,
    'reconcile-period': constants.ENV_RECONCILE_PERIOD,
    'ansible-args': constants.ENV_ANSIBLE_ARGS,
    'ansible-verbosity': constants.ENV_ANSIBLE_VERBOSITY,
    'ansible-log-events': constants.ENV_LOG_EVENTS,
    'metrics-bind-address': constants.ENV_METRICS,
    'health-probe-bind-address': constants.ENV_HEALTH_PROBE,
    'inject-owner-ref': constants.ENV_INJECT_OWNER_REF,
    'max-runner-artifacts': constants.ENV_MAX_RUNNER_ARTIFACTS,
    'leader-elect': constants.ENV_LEADER_ELECT,
    'enable-leader-election': constants.ENV_LEADER_ELECT,  # the SDK's deprecated name
    'leader-election-id': constants.ENV_LEADER_ELECTION_ID,
    'leader-election-namespace': constants.ENV_LEADER_ELECTION_NAMESPACE,
    'leader-elect-lease-duration': constants.ENV_LEASE_DURATION,
    'leader-elect-renew-deadline': constants.ENV_RENEW_DEADLINE,
    'leader-elect-retry-period': constants.ENV_RETRY_PERIOD,
}
BOOLEAN_FLAGS: Final = frozenset({'inject-owner-ref', 'leader-elect', 'enable-leader-election'})
IGNORED: Final = {  # accepted for the SDK's command lines, with a warning
    'leader-elect-resource-lock': "the lock is always a Lease (as in the SDK, which "
                                  "deprecated the flag)",
}


def flags_to_env(argv: Sequence[str]) -> dict[str, str]:
    """The environment variables the flags set; raise ConfigError naming a bad flag."""
    result: dict[str, str] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if not arg.startswith('-') or arg in ('-', '--'):
            raise config.ConfigError(f"unexpected argument {arg!r} (flags only)")
        name, has_value, value = arg.lstrip('-').partition('=')
        if name in IGNORED:
            if not has_value and args:
                args.pop(0)
            print(f"ansible-kopf: --{name} is ignored: {IGNORED[name]}", file=sys.stderr)
            continue
        if name not in FLAGS:
            raise config.ConfigError(f"unknown flag --{name} (known: "
                                     f"{', '.join('--' + f for f in FLAGS)})")
        if not has_value:
            if name in BOOLEAN_FLAGS:
                value = 'true'
            elif not args:
                raise config.ConfigError(f"--{name} needs a value")
            else:
                value = args.pop(0)
        result[FLAGS[name]] = value
    return result


def main(argv: Sequence[str] | None = None) -> int:
    try:
        os.environ.update(flags_to_env(sys.argv[1:] if argv is None else argv))
        cfg, entries = handlers.load()  # importing handlers registered its start-up activity
    except (config.ConfigError, watches.WatchesError) as e:
        print(f"ansible-kopf: {e}", file=sys.stderr)
        return 2
    kopf.configure(log_format=kopf.LogFormat.FULL)
    elector: leader_election.Elector | None = None
    if cfg.election is not None:
        elector = leader_election.Elector(client.connect().leases(), cfg.election)
        with _healthy_meanwhile(cfg.liveness_endpoint):
            elector.acquire()
    lost, keeping = threading.Event(), threading.Event()
    if elector is not None:
        def on_lost() -> None:
            lost.set()
            leader_election.stop_self(grace=30.0)
        elector.keep(on_lost, keeping)
    try:
        kopf.run(
            registry=kopf.get_default_registry(),  # handlers' start-up activity registers the rest
            clusterwide=cfg.clusterwide,
            namespaces=cfg.namespaces,
            liveness_endpoint=cfg.liveness_endpoint,
            standalone=True,
            memo=kopf.Memo(loaded=(cfg, entries)),  # read once: the start-up activity uses them
        )
    finally:
        keeping.set()
        if elector is not None and not lost.is_set():
            elector.release()
    return 1 if lost.is_set() else 0


class _Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header('Content-Length', '0')
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@contextlib.contextmanager
def _healthy_meanwhile(endpoint: str | None) -> Iterator[None]:
    """Answer the health probe (200 on any path) while a standby waits for the Lease;
    kopf's own endpoint takes the port over afterwards."""
    if endpoint is None:
        yield
        return
    url = urllib.parse.urlsplit(endpoint)
    server = http.server.ThreadingHTTPServer((url.hostname or '0.0.0.0', url.port or 80),  # noqa: S104
                                             _Healthy)
    thread = threading.Thread(target=server.serve_forever, name='standby-health', daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


if __name__ == '__main__':
    sys.exit(main())
