"""Fixtures of the server tests: the model tests' tiny masked-LM directory."""

from tests.model.conftest import make_mlm_dir  # noqa: F401  (a fixture, found by name)
