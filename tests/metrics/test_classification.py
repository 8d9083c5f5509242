"""Classification / regression metrics against scikit-learn and scipy on random inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from bertkit.metrics import (
    GLUE_METRICS,
    accuracy,
    f1_score,
    glue_metrics,
    macro_f1,
    matthews_corrcoef,
    pearson,
    rankdata,
    spearman,
)

SEEDS = range(25)


def _labels(seed: int, classes: int = 2, n: int | None = None):
    rng = np.random.default_rng(seed)
    n = n or int(rng.integers(1, 60))
    return rng.integers(0, classes, n), rng.integers(0, classes, n)


@pytest.mark.parametrize("seed", SEEDS)
def test_accuracy_f1_mcc_match_sklearn(seed):
    pred, gold = _labels(seed)
    assert accuracy(pred, gold) == pytest.approx(skm.accuracy_score(gold, pred), abs=1e-15)
    assert f1_score(pred, gold) == pytest.approx(skm.f1_score(gold, pred, zero_division=0), abs=1e-12)
    assert matthews_corrcoef(pred, gold) == pytest.approx(skm.matthews_corrcoef(gold, pred), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_multiclass_mcc_and_macro_f1_match_sklearn(seed):
    pred, gold = _labels(seed, classes=int(2 + seed % 4))
    assert matthews_corrcoef(pred, gold) == pytest.approx(skm.matthews_corrcoef(gold, pred), abs=1e-12)
    expected = skm.f1_score(gold, pred, average="macro", zero_division=0)
    assert macro_f1(pred, gold) == pytest.approx(expected, abs=1e-12)


def test_string_labels_work():
    gold = ["entailment", "neutral", "contradiction", "neutral"]
    pred = ["entailment", "neutral", "neutral", "contradiction"]
    assert accuracy(pred, gold) == 0.5
    assert matthews_corrcoef(pred, gold) == pytest.approx(skm.matthews_corrcoef(gold, pred))


@pytest.mark.filterwarnings("ignore:A single label was found")
@pytest.mark.parametrize("pred,gold", [
    ([1, 1, 1, 1], [1, 0, 1, 0]),      # one predicted class
    ([1, 0, 1, 0], [0, 0, 0, 0]),      # one gold class
    ([0, 0, 0], [0, 0, 0]),            # everything one class
])
def test_degenerate_mcc_is_zero_like_sklearn(pred, gold):
    assert matthews_corrcoef(pred, gold) == 0.0 == skm.matthews_corrcoef(gold, pred)


def test_f1_without_positives_is_zero():
    assert f1_score([0, 0], [0, 0]) == 0.0 == skm.f1_score([0, 0], [0, 0], zero_division=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_pearson_spearman_match_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 80))
    x = rng.normal(size=n)
    y = 0.5 * x + rng.normal(size=n)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    # Coarse rounding makes many ties: Spearman must average tied ranks.
    xt, yt = np.round(x), np.round(y * 2) / 2
    assert spearman(xt, yt) == pytest.approx(stats.spearmanr(xt, yt)[0], abs=1e-12)
    np.testing.assert_allclose(rankdata(xt), stats.rankdata(xt), rtol=0, atol=0)


def test_pearson_of_constant_is_nan():
    assert math.isnan(pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 predictions but 3 labels"):
        accuracy([1, 0], [1, 0, 1])


def test_glue_metrics_names_and_values():
    pred, gold = _labels(3, n=50)
    assert list(glue_metrics("cola", pred, gold)) == ["mcc"]
    mrpc = glue_metrics("MRPC", pred, gold)
    assert list(mrpc) == ["f1", "accuracy"]
    assert mrpc["f1"] == pytest.approx(skm.f1_score(gold, pred))
    assert list(glue_metrics("sts-b", [0.1, 0.5, 0.2], [1.0, 3.0, 2.0])) == ["spearman", "pearson"]
    assert set(GLUE_METRICS) >= {"sst2", "qqp", "mnli", "mnli-mm", "qnli", "rte", "wnli"}
    with pytest.raises(ValueError, match="unknown GLUE task"):
        glue_metrics("squad", pred, gold)
