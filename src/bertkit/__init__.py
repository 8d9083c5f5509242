"""bertkit: BERT end to end on PyTorch.

The library API mirrors the system: :mod:`bertkit.tokenizer` (WordPiece),
:mod:`bertkit.model` (the network and its heads), :mod:`bertkit.checkpoint`
(model directories, Hugging Face import/export), :mod:`bertkit.pretraining`,
:mod:`bertkit.tasks` (fine-tuning task families) and :mod:`bertkit.metrics`.
"""

__version__ = "0.1.0"
