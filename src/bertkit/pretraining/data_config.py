"""Settings of pre-training data creation (``bertkit pretrain-data``): one frozen dataclass
for the output's settings and one for its masking, each field declaring its flag, help,
default and allowed range (:func:`bertkit.options.option`); a value outside its range is an
:class:`~bertkit.errors.OptionError` (a ``ValueError``) when the settings are made. No numpy
or torch import here, so the CLI can build its parser from it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertkit.options import check_config, option, option_of
from bertkit.tokenizer.settings import TokenizerOptions


@dataclass(frozen=True)
class MaskingConfig:
    """The masked-LM settings (stored in ``meta.json``; :mod:`bertkit.pretraining.masking`
    applies them at creation, or at load time with dynamic masking)."""

    masked_lm_prob: float = option(0.15, "share of non-special tokens to predict (80% [MASK], "
                                         "10% random, 10% kept)", gt=0, lt=1)
    max_predictions_per_seq: int = option(20, "cap on masked positions per instance (20 for 128, "
                                              "80 for 512)", ge=1)
    whole_word_mask: bool = option(False, "mask whole words (a piece and its ## continuations) "
                                          "together")

    def __post_init__(self):
        check_config(self, "masking")


@dataclass(frozen=True)
class CreationSettings:
    """Everything that decides the output (all of it is stored in ``meta.json``); each field
    declares its ``pretrain-data`` flag; the masking fields are :class:`MaskingConfig`'s, the
    normaliser's :class:`~bertkit.tokenizer.settings.TokenizerOptions` (``None``: as saved with
    the vocabulary; the data's ``meta.json`` stores the values used)."""

    max_seq_length: int = option(128, "tokens per instance, [CLS] and [SEP]s included (128 or 512 "
                                      "in BERT; at least 5: [CLS] A [SEP] B [SEP])", ge=5)
    short_seq_prob: float = option(0.1, "probability of a shorter random target length for a "
                                        "document", ge=0, le=1)
    dupe_factor: int = option(5, "passes over the corpus, each with other packings (and masks "
                                 "when static)", ge=1)
    masked_lm_prob: float = option_of(MaskingConfig, "masked_lm_prob")
    max_predictions_per_seq: int = option_of(MaskingConfig, "max_predictions_per_seq")
    whole_word_mask: bool = option_of(MaskingConfig, "whole_word_mask")
    dynamic_masking: bool = option(False, "store unmasked tokens; masks are drawn at load time per "
                                          "(seed, epoch, index)")
    split_sentences: bool = option(False, "treat each line as a paragraph and split it into "
                                          "sentences (rule-based)")
    lowercase: bool | None = option_of(TokenizerOptions, "lowercase")
    strip_accents: bool | None = option_of(TokenizerOptions, "strip_accents")
    google_tokenizer: bool = option(
        False, "tokenize exactly as Google's original tokenization.py (whole-text lower-casing "
               "with final sigma, words up to 200 characters, special tokens in the text split) "
               "instead of Hugging Face's tokenizer (BertTokenizer google_compat)")
    seed: int = option(12345, "random seed", ge=0)
    chunk_sentences: int = option(20_000, "sentences per chunk of documents: the unit of parallel "
                                          "work and of the pool NotNext documents are drawn from "
                                          "(changes the output)", ge=1)
    shuffle_documents: bool = option(True, "shuffle all documents of all inputs before chunking (as "
                                           "BERT's script does), so that NotNext segments come "
                                           "from anywhere in the corpus")

    def __post_init__(self):
        check_config(self, "pretrain-data")

    @property
    def masking(self) -> MaskingConfig:
        return MaskingConfig(self.masked_lm_prob, self.max_predictions_per_seq, self.whole_word_mask)
