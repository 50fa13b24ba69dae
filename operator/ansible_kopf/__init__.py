"""
ansible_kopf: a Kubernetes operator whose behaviour lives in Ansible roles.

A thin kopf shim in the spirit of the Operator SDK's Ansible operator: ``watches.yaml``
maps each group/version/kind to a role or playbook; every reconcile runs it through
ansible-runner with the object's spec as variables and writes the outcome to ``.status``.

Modules, one concept each; layers import only downward::

    __main__, handlers                   entry point; kopf start-up, settings, handlers
    reconciling                          one run for one object: lock, read, mark, run, report
    runner, events, status, kubeapi,     ansible-runner; its event stream; .status content;
      locks                              the API calls; concurrency bounds
    warm                                 warm Ansible servers: started once, forked per run
    zygote, launch, wire                 the servers' process, their per-run client, protocol
      preloads, children                 what a server imports; what its forked child does
    watches, extravars, config,          watches.yaml; a run's variables; env configuration;
      casing, durations                  SDK snake_case; Go durations
    constants                            names and defaults

Start it with ``python -m ansible_kopf`` (see ``__main__``), or for development with
``kopf run -m ansible_kopf.handlers``.
"""
