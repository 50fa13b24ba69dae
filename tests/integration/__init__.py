"""Integration tests: against a real Kubernetes API server and real MySQL servers."""
