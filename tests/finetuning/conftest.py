"""Fixtures shared by the fine-tuning tests (tiny, made by the tests)."""

from tests.finetune_helpers import model_dir, toy_dir  # noqa: F401
