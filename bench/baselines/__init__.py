"""The two designs the benchmark compares the operator with (run with ``kopf run``)."""
