"""
``python -m ansible_kopf [flags]``: read the Operator SDK's command-line flags, check the
configuration and ``watches.yaml`` before anything else (a bad flag or file ends the
process with a one-line message and exit code 2), then run kopf with the namespaces and
liveness endpoint from the environment (see :mod:`config`).

Each flag is its environment variable's equivalent (:data:`FLAGS`) and wins over it, so the
rest of the operator reads one source. Go's flag syntax: ``--name value``, ``--name=value``,
a boolean alone (``--inject-owner-ref``) or with ``=false``. An unknown flag is an error
that names it; so are the SDK's leader-election flags, which this operator answers with
its Deployment's leader-for-life init container instead (``deploy/operator``).
"""
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Final

import kopf

from ansible_kopf import config, constants, handlers, watches

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
}
BOOLEAN_FLAGS: Final = frozenset({'inject-owner-ref'})
NOT_HERE: Final = {
    'leader-elect': "leader election is the operator Deployment's init container "
                    "(deploy/operator/leader_for_life.py), not a flag",
    'leader-election-id': "leader election is the operator Deployment's init container "
                          "(deploy/operator/leader_for_life.py), not a flag",
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
        if name in NOT_HERE:
            raise config.ConfigError(f"--{name}: {NOT_HERE[name]}")
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
    kopf.run(
        registry=kopf.get_default_registry(),  # handlers' start-up activity registers the rest
        clusterwide=cfg.clusterwide,
        namespaces=cfg.namespaces,
        liveness_endpoint=cfg.liveness_endpoint,
        standalone=True,
        memo=kopf.Memo(loaded=(cfg, entries)),  # read once: the start-up activity uses them
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
