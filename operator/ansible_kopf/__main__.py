"""
``python -m ansible_kopf``: check the configuration and ``watches.yaml`` before anything
else (a bad file ends the process with a one-line message and exit code 2), then run kopf
with the namespaces and liveness endpoint from the environment (see :mod:`config`).
"""
import sys

import kopf

from ansible_kopf import config, handlers, watches


def main() -> int:
    try:
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
