"""Every evaluation metric of bertkit, with its official definition.

* :mod:`bertkit.metrics.classification`: accuracy, F1, MCC, Pearson, Spearman, GLUE.
* :mod:`bertkit.metrics.ner`: entity-level precision/recall/F1 as conlleval.
* :mod:`bertkit.metrics.squad`: SQuAD exact match / F1 as the official v1.1 and v2.0
  scripts, each for its own version.

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
    SQUAD_RULES,
    check_dataset,
    compute_exact,
    compute_f1,
    compute_f1_v1,
    find_best_threshold,
    missing_predictions,
    normalize_answer,
    squad_evaluate,
    squad_evaluate_v1,
    squad_rules,
)

__all__ = [
    "GLUE_METRICS",
    "SQUAD_RULES",
    "accuracy",
    "check_dataset",
    "compute_exact",
    "compute_f1",
    "compute_f1_v1",
    "entity_scores",
    "f1_score",
    "find_best_threshold",
    "get_entities",
    "glue_metrics",
    "macro_f1",
    "matthews_corrcoef",
    "missing_predictions",
    "normalize_answer",
    "pearson",
    "rankdata",
    "spearman",
    "split_tag",
    "squad_evaluate",
    "squad_evaluate_v1",
    "squad_rules",
]
