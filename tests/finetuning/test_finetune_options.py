"""Fine-tuning with the speed options: padding-free compute (``attention_impl``) trains like
the padded path and is kept in the saved model. (``--compile`` is checked by hand and
measured in docs/scaling.md: its first CPU compilation alone takes minutes, too slow here.)"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.tasks import get_task
from tests.finetune_helpers import FAST, make_model, one_thread, write_sst2  # noqa: F401


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("model")), write_sst2(tmp_path_factory.mktemp("sst2"), 64, 30)


def test_unpadded_fine_tuning_matches_padded_and_is_saved(dirs, tmp_path):
    model_dir, data = dirs
    runs = {}
    for impl in ("padded", "unpadded"):
        cfg = FinetuneConfig(**{**FAST, "epochs": 2, "dropout": 0.0, "attention_impl": impl})
        runs[impl] = finetune(get_task("sst2"), model_dir, data, tmp_path / impl, cfg)[1]
    assert runs["unpadded"].metrics == pytest.approx(runs["padded"].metrics, abs=1e-4)
    a, b = (load_file(tmp_path / impl / "model.safetensors") for impl in ("padded", "unpadded"))
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-4, atol=1e-4)
    saved = json.loads((tmp_path / "unpadded" / "config.json").read_text())
    assert saved["attention_impl"] == "unpadded"

