"""Pre-training data: the public API of data creation and loading (see docs/pretraining-data.md).

``create_pretraining_data(inputs, vocab_file, output_dir, CreationSettings(...), workers=,
shard_size=)`` writes sharded memory-mapped arrays plus ``meta.json``;
``PretrainingDataset(directory, dynamic_masking=None, seed=0)`` reads them back and
``collate(items)`` batches its items into torch tensors.
"""

from bertkit.pretraining.create import CreationSettings, create_pretraining_data
from bertkit.pretraining.dataset import PretrainingDataset, collate
from bertkit.pretraining.documents import iter_documents, split_into_sentences
from bertkit.pretraining.masking import MaskingConfig, VocabInfo, dynamic_rng, mask_sequence

__all__ = [
    "CreationSettings",
    "MaskingConfig",
    "PretrainingDataset",
    "VocabInfo",
    "collate",
    "create_pretraining_data",
    "dynamic_rng",
    "iter_documents",
    "mask_sequence",
    "split_into_sentences",
]
