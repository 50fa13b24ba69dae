"""Test suite of the MySQL operator: unit tests, and integration tests against a real cluster."""
