"""Every evaluation metric of bertkit, with its official definition.

* :mod:`bertkit.metrics.classification`: accuracy, F1, MCC, Pearson, Spearman, GLUE.
* :mod:`bertkit.metrics.ner`: entity-level precision/recall/F1 as conlleval.
* :mod:`bertkit.metrics.squad`: SQuAD exact match / F1 as the official v2.0 script.

numpy only: no scikit-learn, scipy or seqeval at run time (the tests use them as references).
"""

from bertkit.metrics.classification import (
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
from bertkit.metrics.ner import entity_scores, get_entities, split_tag
from bertkit.metrics.squad import (
    compute_exact,
    compute_f1,
    find_best_threshold,
    normalize_answer,
    squad_evaluate,
)

__all__ = [
    "GLUE_METRICS",
    "accuracy",
    "compute_exact",
    "compute_f1",
    "entity_scores",
    "f1_score",
    "find_best_threshold",
    "get_entities",
    "glue_metrics",
    "macro_f1",
    "matthews_corrcoef",
    "normalize_answer",
    "pearson",
    "rankdata",
    "spearman",
    "split_tag",
    "squad_evaluate",
]
