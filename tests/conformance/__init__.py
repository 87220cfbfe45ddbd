"""The store conformance suite: every test runs against every backend in backends.py."""
