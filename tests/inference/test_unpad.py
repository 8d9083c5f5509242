"""``BertInference.unpad``: batches of rows of different lengths on their real tokens only,
where the route allows it, with the same answers (serve --attention-impl)."""

from __future__ import annotations

import numpy as np
import pytest

from bertkit.errors import OptionError
from bertkit.inference import compiled, load

from ..task_models import make_task_model

TEXTS = ["the man went to the store . he is good", "hello", "she was bad , the night was good !", "a day"]


def test_auto_unpads_the_eager_fp32_route_and_answers_as_padded(tmp_path, cpu_class):
    directory = make_task_model(tmp_path, "classify")
    padded = load(directory, precision="fp32")
    assert padded.attention_impl == "padded" and not padded.unpad("padded")
    unpadded = load(directory, precision="fp32")
    assert unpadded.unpad("auto") and unpadded.attention_impl == "unpadded"
    assert "real tokens" in unpadded.attention_reason
    plans = [padded.plan_predict(t, "truncate", padded.long_text) for t in TEXTS]
    rows = [p.rows[0] for p in plans]
    assert len({len(r.input_ids) for r in rows}) > 1  # a batch with padding
    np.testing.assert_allclose(np.stack(unpadded.run_rows(plans[0].key, rows)),
                               np.stack(padded.run_rows(plans[0].key, rows)), atol=1e-5)


def test_a_fixed_shape_route_stays_padded_and_unpadded_is_refused_there(tmp_path, monkeypatch):
    directory = make_task_model(tmp_path, "classify")
    bert = load(directory, precision="fp32")
    monkeypatch.setattr(compiled, "is_compiled", lambda model: True)
    assert not bert.unpad("auto") and bert.attention_impl == "padded"
    assert bert.attention_reason == "auto: the compiled graph keeps the padded shapes"
    with pytest.raises(OptionError, match="--attention-impl unpadded: the compiled graph keeps"):
        bert.unpad("unpadded")
    with pytest.raises(OptionError, match="--attention-impl must be one of auto, padded, unpadded"):
        bert.unpad("packed")


# bf16 on the classes not measured unpadded (those of BF16_UNPADDED_CLASSES unpad: the next
# test); dynamic INT8 on every class
@pytest.mark.parametrize("klass, precision, why", [
    *((klass, "bf16", "bf16 rounds the same row differently") for klass in ("avx2", "avx512-vnni")),
    *((klass, "int8", "dynamic INT8 scales a batch's activations") for klass in ("avx2", "avx512-bf16", "amx"))])
def test_auto_keeps_bf16_and_int8_padded_so_that_the_doors_agree(tmp_path, monkeypatch, klass, precision, why):
    from bertkit.cpu import BF16_UNPADDED_CLASSES, CPU_CLASS_ENV

    assert precision != "bf16" or klass not in BF16_UNPADDED_CLASSES
    monkeypatch.setenv(CPU_CLASS_ENV, klass)
    bert = load(make_task_model(tmp_path, "classify"), precision=precision)
    assert not bert.unpad("auto") and why in bert.attention_reason
    assert bert.unpad("unpadded") and bert.attention_impl == "unpadded"  # asked for: done


@pytest.mark.parametrize("klass", ["avx2", "avx512-vnni", "avx512-bf16", "amx"])
def test_auto_unpads_bf16_where_measured_and_answers_as_padded_within_rounding(tmp_path, monkeypatch, klass):
    from bertkit.cpu import BF16_UNPADDED_CLASSES, CPU_CLASS_ENV

    monkeypatch.setenv(CPU_CLASS_ENV, klass)
    directory = make_task_model(tmp_path, "classify")
    padded, unpadded = load(directory, precision="bf16"), load(directory, precision="bf16")
    assert not padded.unpad("padded")
    assert unpadded.unpad("auto") is (klass in BF16_UNPADDED_CLASSES)
    why = BF16_UNPADDED_CLASSES.get(klass)
    assert why is None or why in unpadded.attention_reason
    plans = [padded.plan_predict(t, "truncate", padded.long_text) for t in TEXTS]
    rows = [p.rows[0] for p in plans]
    # bf16 ulps at most where the kernels are emulated (this machine may not be the class)
    np.testing.assert_allclose(np.stack(unpadded.run_rows(plans[0].key, rows)),
                               np.stack(padded.run_rows(plans[0].key, rows)), atol=2e-2)
