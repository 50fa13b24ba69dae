"""
``python -m ansible_kopf``: check the configuration and ``watches.yaml`` before anything
else (a bad file ends the process with a one-line message and exit code 2), then run kopf
with the namespaces and liveness endpoint from the environment (see :mod:`config`).
"""
import sys

import kopf

from ansible_kopf import (
    config,
    handlers,  # noqa: F401  (registers the start-up activity)
    watches,
)


def main() -> int:
    try:
        cfg = config.from_env()
        watches.load(cfg.watches_file, default_max_runner_artifacts=cfg.max_runner_artifacts)
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
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
