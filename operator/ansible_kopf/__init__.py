"""
ansible_kopf: a Kubernetes operator whose behaviour lives in Ansible roles.

A thin kopf shim in the spirit of the Operator SDK's Ansible operator: ``watches.yaml``
maps each group/version/kind to a role or playbook; every reconcile runs it through
ansible-runner with the object's spec as variables and writes the outcome to ``.status``.

Grouped by concern; layers import only downward (``make lint`` checks it with import-linter:
``[tool.importlinter]`` in ``pyproject.toml``)::

    __main__       entry point: check configuration, lead (``--leader-elect``), run kopf
    handlers       kopf start-up, settings, and the handlers of every watches entry
    requeues       runs no kopf event starts: a dependent changed, requeue_after, the period
    reconciling    one run for one object: its turn, a fresh read, Running, the run, .status
    config         the process's configuration from the environment
    kube/  run/    the API side (kube.client, kube.proxy, kube.dependents, kube.written,
                   kube.leader_election, kube.errors) and the run side (run.concurrency,
                   run.runner, run.launchers, run.runner_events, run.summary); neither
                   imports the other
    sdk/           the SDK's contract: sdk.watches, sdk.extravars, sdk.casing,
                   sdk.durations, sdk.status, sdk.metrics
    warm/          warm Ansible servers, which import nothing of the rest (``warm/__init__``)
    constants      names and defaults

One reconcile, in order: kopf calls a handler (:mod:`handlers`), which calls
:func:`reconciling.reconcile`: :mod:`run.concurrency` for its turn, :mod:`kube.client` to
read the object, :mod:`sdk.status` to mark it ``Running``, :mod:`kube.proxy` for the run's
kubeconfig, then :func:`run.runner.run_async`, which builds the variables
(:mod:`sdk.extravars`, :mod:`sdk.casing`), prepares ansible-runner and has the launcher
(:mod:`run.launchers`) start the process: cold, or through :mod:`warm.pool` to a warm
server (:mod:`warm.forkserver`), whose forked child (:mod:`warm.child`) is
``ansible-playbook`` and is reached by the per-run client (:mod:`warm.client`) over
:mod:`warm.wire`. The run's events go through :mod:`run.runner_events` (the outcome;
``osdk_metric`` results to :mod:`sdk.metrics`); :mod:`run.summary` words the log lines,
and :mod:`sdk.status` the ``.status`` that :mod:`kube.client` writes. The run's API requests
go through :mod:`kube.proxy`; a kind it reports is watched by :mod:`kube.dependents`, and a
change there is the other way into :func:`reconciling.reconcile` (:class:`requeues.Requeue`,
which also runs what ``requeue_after`` and the reconcile period ask for).

Start it with ``python -m ansible_kopf`` (see ``__main__``), or for development with
``kopf run -m ansible_kopf.handlers``.
"""
