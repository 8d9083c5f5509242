"""Embeddings of texts longer than the model's limit, in overlapping windows (``embed`` with
``long_text`` in ``window`` mode); the window arithmetic is :mod:`bertkit.tasks.windows`'s."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bertkit.errors import BertkitError
from bertkit.tasks.windows import LongText, max_context_window, pool_rows, text_windows


def embed_in_windows(bert, texts: Sequence[str], pairs: Sequence[str] | None, layers, pool: str,
                     combine: str, batch_size: int, max_length: int, long_text: LongText,
                     progress: bool = False):
    """``(features, tokens)`` of ``texts`` embedded in windows of ``max_length`` tokens by a
    :class:`bertkit.inference.BertInference` (its ``embed`` with ``long_text`` calls this).

    Each text's WordPieces are cut by ``long_text.spans(n, max_length - 2)``; every window is
    ``[CLS] piece... [SEP]``. ``pool="cls"``/``"mean"``: each window's vector (its ``[CLS]``,
    or the mean over its positions) pooled over the windows with ``long_text.pool``;
    ``pool="none"``: one row per token of ``[CLS] pieces [SEP]``, a piece's row taken from its
    max-context window, the ``[CLS]``/``[SEP]`` rows pooled over the windows. A text that fits
    in one window gets exactly the unwindowed result. Pairs are refused (window one text).
    """
    from types import SimpleNamespace

    import torch

    if pairs is not None:
        raise BertkitError("--long-text window embeds single texts; pairs are not windowed "
                           "(drop --pair-column or use --long-text truncate)")
    tok = bert.tokenizer
    cls, sep = tok.cls_token_id, tok.sep_token_id
    windows, owners, layouts = [], [], []
    for t, text in enumerate(texts):
        pieces = tok.text_to_ids(text)
        spans = long_text.spans(len(pieces), max_length - 2)
        layouts.append((pieces, spans))
        for ids, types in text_windows(tok, pieces, None, max_length, long_text)[0]:
            windows.append(SimpleNamespace(input_ids=ids, token_type_ids=types))
            owners.append(t)
    from bertkit.precision import autocast

    rows: list = [None] * len(windows)
    with torch.inference_mode(), autocast(bert.precision, bert.device):
        for indices, ids, types, mask in bert._batches(windows, batch_size, progress, "embed"):
            features = bert.features(ids, types, mask, layers, combine)
            weights = mask.unsqueeze(-1).to(features.dtype)
            means = (features * weights).sum(1) / weights.sum(1)  # as embed's pool="mean"
            for row, k in enumerate(indices):
                n = len(windows[k].input_ids)
                rows[k] = (features[row, :n].cpu().numpy(), means[row].cpu().numpy())
    tokens = [tok.convert_ids_to_tokens([cls, *pieces, sep]) for pieces, _ in layouts]
    if pool in ("cls", "mean"):
        vectors = [r[0][0] if pool == "cls" else r[1] for r in rows]
        pooled = pool_rows(owners, vectors, len(texts), long_text.pool)
        width = rows[0][1].shape[-1] if rows else 0
        return (np.stack(pooled) if pooled else np.zeros((0, width), np.float32)), tokens
    out, k = [], 0
    for pieces, spans in layouts:
        mine = [r[0] for r in rows[k: k + len(spans)]]
        k += len(spans)
        edges = pool_rows([0] * len(mine), [r[[0, -1]] for r in mine], 1, long_text.pool)[0]
        middle = [mine[max_context_window(spans, p)][p - spans[max_context_window(spans, p)][0] + 1]
                  for p in range(len(pieces))]
        out.append(np.stack([edges[0], *middle, edges[1]]))
    return out, tokens
