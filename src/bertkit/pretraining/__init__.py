"""Pre-training: data creation (:mod:`bertkit.pretraining.data`) and the pre-training loop.

The data API is re-exported lazily here: ``create_pretraining_data``, ``CreationSettings``,
``PretrainingDataset`` and ``collate``.
"""

_DATA_API = ("create_pretraining_data", "CreationSettings", "PretrainingDataset", "collate")


def __getattr__(name: str):
    if name in _DATA_API:
        from bertkit.pretraining import data

        return getattr(data, name)
    raise AttributeError(f"module 'bertkit.pretraining' has no attribute {name!r}")
