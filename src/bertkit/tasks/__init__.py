"""Fine-tuning task families.

:mod:`bertkit.tasks.formats` reads the official data layouts (GLUE, CoNLL-2003, SQuAD,
SWAG, generic CSV/TSV/JSONL) into plain dataclasses; the task runners live beside it
(``glue``, ``ner``, ``squad``, ``swag``, ``generic``) and are imported on demand.
"""
