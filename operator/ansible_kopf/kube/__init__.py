"""
The operator's side of the Kubernetes API: its own calls, the runs' way to the API server,
and what it watches besides kopf.

    client            the operator's own calls (read an object, patch its status,
                      discovery) and where the API server is (:class:`client.Upstream`)
    errors            the typed failures every caller here raises and catches
    proxy             the runs' API proxy: owner references injected, owned kinds reported
    dependents        watches on the kinds the proxy reported; a change requeues the owner
    written           the fields a run wrote, so a change to others is told apart
    leader_election   the Lease of ``--leader-elect``

Imports: :mod:`ansible_kopf.sdk`, :mod:`ansible_kopf.constants` and each other, never the
run side (``make lint`` checks it).
"""
