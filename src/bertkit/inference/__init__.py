"""The inference engine: every door (the Python API, ``bertkit predict``/``evaluate``/
``fill-mask``/``embed``/``attention``, ``bertkit serve``, ONNX) answers through this one package.

* :mod:`~bertkit.inference.engine` - :func:`load` and :class:`BertInference` (a loaded model
  + tokenizer at a precision; fill-mask, embeddings, batching);
* :mod:`~bertkit.inference.heads` - task answers on raw text, planned in rows a server can
  batch across requests; each task family plans and decodes its own (no task names here);
* :mod:`~bertkit.inference.features` - the one runner of a task's prepared features;
* :mod:`~bertkit.inference.export` - ONNX export and the ONNX Runtime model;
* :mod:`~bertkit.inference.windows` - embeddings of texts longer than the model's limit.

In a notebook::

    from bertkit.inference import load
    bert = load("path/to/model")
    bert.predict("a fine film")
"""

from bertkit.errors import InputError
from bertkit.inference.engine import (
    COMBINES,
    POOLINGS,
    BertInference,
    load,
    resolve_device,
)
from bertkit.inference.heads import Plan, token_batches
from bertkit.training.sampler import length_batches

__all__ = [
    "COMBINES",
    "POOLINGS",
    "BertInference",
    "InputError",
    "Plan",
    "length_batches",
    "load",
    "resolve_device",
    "token_batches",
]
