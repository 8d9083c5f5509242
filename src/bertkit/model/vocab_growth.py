"""A trained model's vocabulary, grown or exchanged: the word-embedding rows (and the tied
masked-LM decoder and its bias) follow the tokens.

Contract:

* :func:`remap_vocabulary(model, old_tokenizer, tokens) <remap_vocabulary>` gives ``model``
  the vocabulary ``tokens`` in place: a token of the old vocabulary keeps its row of the
  word embeddings (and its entry of the masked-LM bias); any other token gets the mean of
  the rows of the pieces the old tokenizer splits it into (a ``##x`` token: ``x`` split as
  the continuation of a word, :func:`piece_ids`). The decoder stays tied
  to the word embeddings; ``config.vocab_size`` follows. Returns ``(kept, new)``.
* :func:`grow_vocabulary(model, tokenizer, tokens) <grow_vocabulary>` appends ``tokens``
  (those not in the vocabulary yet, duplicates dropped, in order) after the old ones, so
  every old id, row and output is unchanged, and returns the grown tokenizer (same settings)
  and the tokens added. A token the tokenizer could never produce (``Foo`` for an uncased
  one, ``a b``) is an :class:`~bertkit.errors.OptionError` naming it and what it becomes.
* :func:`top_new_words(tokenizer, lines, n) <top_new_words>`: the ``n`` most frequent words
  of ``lines`` (normalised as the tokenizer does) that are not one token yet, each seen at
  least ``min_count`` times.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from bertkit.errors import OptionError


def _base(model: nn.Module) -> nn.Module:
    return model.bert if hasattr(model, "bert") else model


def piece_ids(tokenizer, token: str) -> list[int]:
    """The old vocabulary's ids for ``token``: its WordPiece pieces (a ``##x`` token is split
    as the continuation of a word, so into ``##`` pieces); ``[UNK]`` when it has none."""
    continuation = token.startswith("##") and len(token) > 2
    text = token[2:] if continuation else token
    ids: list[int] = []
    for index, word in enumerate(tokenizer.basic.words(text) or [text]):
        ids += tokenizer.wordpiece.segment(word, continuation and index == 0)[0]
    return ids or [tokenizer.unk_token_id]


def remap_vocabulary(model: nn.Module, old_tokenizer, tokens: Sequence[str]) -> tuple[int, int]:
    """Give ``model`` the vocabulary ``tokens`` (see the module docstring); ``(kept, new)``."""
    embeddings = _base(model).embeddings
    old = embeddings.word_embeddings.weight.detach()
    head = getattr(model, "mlm_head", None)
    old_bias = head.bias.detach() if head is not None else None
    known = old_tokenizer.vocab.token_to_id
    rows = torch.empty(len(tokens), old.shape[1], dtype=old.dtype, device=old.device)
    bias = None if old_bias is None else torch.empty(len(tokens), dtype=old_bias.dtype, device=old.device)
    kept = 0
    for index, token in enumerate(tokens):
        if token in known:
            source = [known[token]]
            kept += 1
        else:
            source = piece_ids(old_tokenizer, token)
        rows[index] = old[source].mean(0)
        if bias is not None:
            bias[index] = old_bias[source].mean()
    _install(model, rows, bias)
    return kept, len(tokens) - kept


def _install(model: nn.Module, rows: torch.Tensor, bias: torch.Tensor | None) -> None:
    """New word-embedding rows (the decoder tied to them) and masked-LM bias; the config's
    ``vocab_size`` follows."""
    base = _base(model)
    embedding = nn.Embedding(rows.shape[0], rows.shape[1], device=rows.device, dtype=rows.dtype)
    with torch.no_grad():
        embedding.weight.copy_(rows)
    base.embeddings.word_embeddings = embedding
    head = getattr(model, "mlm_head", None)
    if head is not None:
        head.decoder.weight = embedding.weight  # still one tensor
        head.decoder.out_features = rows.shape[0]
        head.bias = nn.Parameter(bias)
    for config in {id(c): c for c in (model.config, base.config)}.values():
        config.vocab_size = rows.shape[0]


def grow_vocabulary(model: nn.Module, tokenizer, tokens: Iterable[str]):
    """Append ``tokens`` to the vocabulary of ``model`` and ``tokenizer``; returns the grown
    tokenizer and the tokens added (those already in it are skipped)."""
    from bertkit.tokenizer import BertTokenizer, Vocab

    added: list[str] = []
    known = tokenizer.vocab.token_to_id
    for token in tokens:
        token = token.strip()
        if not token or token in known or token in added:
            continue
        text = token[2:] if token.startswith("##") and len(token) > 2 else token
        words = tokenizer.basic.words(text)
        if words != [text]:
            raise OptionError(f"token {token!r}: this tokenizer (lowercase={tokenizer.lowercase}, "
                              f"strip_accents={tokenizer.strip_accents}) never produces it; it "
                              f"reads the text as {words!r}: add the token in that form")
        added.append(token)
    grown = BertTokenizer(Vocab(tokenizer.vocab.tokens + added), lowercase=tokenizer.lowercase,
                          strip_accents=tokenizer.strip_accents, split_cjk=tokenizer.split_cjk,
                          model_max_length=tokenizer.model_max_length,
                          google_compat=tokenizer.google_compat)
    if added:
        remap_vocabulary(model, tokenizer, grown.vocab.tokens)
    return grown, added


def top_new_words(tokenizer, lines: Iterable[str], n: int, min_count: int = 2,
                  progress: bool | None = False) -> list[str]:
    """The ``n`` most frequent words of ``lines`` (ties: alphabetical) that the tokenizer
    splits into several pieces or ``[UNK]``, each seen at least ``min_count`` times."""
    from tqdm.auto import tqdm

    from bertkit.runlog import bar_disabled

    counts: Counter = Counter()
    for line in tqdm(lines, desc="counting words", unit=" lines", disable=bar_disabled(progress)):
        counts.update(tokenizer.basic.words(line))
    known = tokenizer.vocab.token_to_id
    ranked = sorted((w for w, c in counts.items() if c >= min_count and w not in known),
                    key=lambda w: (-counts[w], w))
    return ranked[:n]
