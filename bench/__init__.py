"""
Benchmarks of the operator against two baselines, on the cluster in ``$KUBECONFIG``.
Not part of the tests: nothing here asserts a timing. ``python -m bench --help``.
"""
