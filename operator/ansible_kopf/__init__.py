"""
ansible_kopf: a Kubernetes operator whose behaviour lives in Ansible roles.

A thin kopf shim in the spirit of the Operator SDK's Ansible operator: ``watches.yaml``
maps each group/version/kind to a role or playbook; every reconcile runs it through
ansible-runner with the object's spec as variables and writes the outcome to ``.status``.

Modules, one concept each; layers import only downward (the build checks it with
import-linter: ``[tool.importlinter]`` in ``pyproject.toml``)::

    __main__                             entry point: check configuration, run kopf
    handlers                             kopf start-up, settings, handlers
    reconciling                          one run for one object: lock, read, mark, run, report
    runner, dependents                   one ansible-runner run; watches on what the watched
                                         objects own (which runs their role again)
    proxy                                the runs' way to the API server: owner references
                                         injected, owned kinds reported to dependents
    launchers, events, status, kubeapi,  how a run's process starts and stops; its event
      locks, summary, extravars          stream; .status content; the API calls;
                                         concurrency bounds; the reconcile summary line;
                                         a run's variables
    warm/, watches, config               warm Ansible servers (importing nothing of the
                                         rest: see ``warm/__init__``); watches.yaml;
                                         environment configuration
    casing, durations, written, leader   SDK snake_case; Go durations; the fields a
                                         write sets; the Lease of --leader-elect
    constants                            names and defaults

One reconcile, in order: kopf calls a handler (:mod:`handlers`), which calls
:func:`reconciling.reconcile`: :mod:`locks` for its turn, :mod:`kubeapi` to read the
object, :mod:`status` to mark it ``Running``, :mod:`proxy` for the run's kubeconfig, then
:func:`runner.run_async`, which builds
the variables (:mod:`extravars`), prepares ansible-runner and has the launcher
(:mod:`launchers`) start the process: cold, or through :mod:`warm.pool` to a warm server
(:mod:`warm.forkserver`), whose forked child (:mod:`warm.child`) is ``ansible-playbook``
and is reached by the per-run client (:mod:`warm.client`) over :mod:`warm.wire`. The
run's events go through :mod:`events` (the outcome); :mod:`summary` words the log lines,
and :mod:`status` the ``.status`` that :mod:`kubeapi` writes. The run's API requests go
through :mod:`proxy`; a kind it reports is watched by :mod:`dependents`, and a change
there is the other way into :func:`reconciling.reconcile` (:class:`handlers.Requeue`).

Start it with ``python -m ansible_kopf`` (see ``__main__``), or for development with
``kopf run -m ansible_kopf.handlers``.
"""
