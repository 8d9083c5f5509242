"""Packing sentences into ``[CLS] A [SEP] B [SEP]`` instances with next-sentence labels.

This follows the algorithm of BERT's ``create_pretraining_data.py``:

* one target length per document: ``max_seq_length - 3``, or with probability
  ``short_seq_prob`` a random length in ``[2, max_seq_length - 3]``;
* whole sentences are gathered until the target is reached (or the document ends); a random
  number of the gathered sentences (at least one) forms segment A;
* a fair coin decides: B is the rest of the gathered sentences (IsNext, label 0), or a run
  of sentences from a random position of a *different* document (NotNext, label 1)
  filling the remaining target; the gathered sentences not used for A are then put back
  to start the next instance;
* one deviation keeps IsNext at 50%: the original forces NotNext whenever only one sentence
  was gathered (a long sentence, a short target, a document's last sentence), which gives
  about 44% IsNext on short documents such as the KJV chapters. Here, when the coin says
  IsNext and only one sentence was gathered, the document's next sentence is taken as B
  (or, at the document's end, the previous sentence as A). Only a one-sentence document
  is always NotNext (it still serves as the random B of other documents);
* the pair is cut to ``max_seq_length - 3`` tokens by removing one token at a time from the
  longer segment, from its front or back at random.

Documents are lists of sentences, each a list of token ids (no special tokens). The
random other document comes from the same chunk of documents (see ``documents.iter_chunks``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

Document = Sequence[Sequence[int]]


@dataclass
class Instance:
    """One NSP pair before special tokens: ``tokens_a``, ``tokens_b`` and whether B is random."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool


def truncate_pair(tokens_a: list[int], tokens_b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Cut the pair in place to at most ``max_tokens`` tokens, from a random end of the longer.

    Same result distribution as the original loop (remove one token at a time from the
    longer segment, B on a tie, from its front or back by a fair coin), computed in closed
    form: the longer loses the difference first, then the two alternate.
    """
    excess = len(tokens_a) + len(tokens_b) - max_tokens
    if excess <= 0:
        return
    difference = len(tokens_a) - len(tokens_b)
    first = min(excess, abs(difference))
    rest = excess - first
    cut_a = rest // 2 + (first if difference > 0 else 0)
    cut_b = rest - rest // 2 + (first if difference <= 0 else 0)
    for tokens, cut in ((tokens_a, cut_a), (tokens_b, cut_b)):
        if cut:
            front = rng.getrandbits(cut).bit_count()  # one fair coin per removed token
            del tokens[len(tokens) - (cut - front) :]
            del tokens[:front]


def _other_document(documents: Sequence[Document], index: int, rng: random.Random) -> Document:
    """A uniformly random document other than ``documents[index]``."""
    other = rng.randrange(len(documents) - 1)
    return documents[other + 1 if other >= index else other]


def instances_from_document(
    documents: Sequence[Document],
    index: int,
    max_seq_length: int,
    short_seq_prob: float,
    rng: random.Random,
) -> list[Instance]:
    """All instances made from ``documents[index]`` (needs ``len(documents) >= 2``)."""
    if len(documents) < 2:
        raise ValueError("next-sentence pairs need at least two documents")
    document = documents[index]
    max_tokens = max_seq_length - 3
    target = max_tokens
    if rng.random() < short_seq_prob:
        target = rng.randint(2, max_tokens)

    instances: list[Instance] = []
    gathered: list[Sequence[int]] = []
    length = 0
    i = 0
    while i < len(document):
        gathered.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            is_random_next = rng.random() < 0.5
            if len(gathered) == 1 and not is_random_next:
                if i + 1 < len(document):  # borrow the next sentence as the true B
                    i += 1
                    gathered.append(document[i])
                elif i > 0:  # a document's last lone sentence: the one before it is A
                    gathered.insert(0, document[i - 1])
                else:
                    is_random_next = True  # a one-sentence document has no continuation
            a_end = rng.randint(1, len(gathered) - 1) if len(gathered) >= 2 else 1
            tokens_a = [t for sentence in gathered[:a_end] for t in sentence]
            tokens_b: list[int] = []
            if is_random_next:
                target_b = target - len(tokens_a)
                other = _other_document(documents, index, rng)
                for j in range(rng.randrange(len(other)), len(other)):
                    tokens_b.extend(other[j])
                    if len(tokens_b) >= target_b:
                        break
                i -= len(gathered) - a_end  # put the unused sentences back
            else:
                tokens_b = [t for sentence in gathered[a_end:] for t in sentence]
            truncate_pair(tokens_a, tokens_b, max_tokens, rng)
            instances.append(Instance(tokens_a, tokens_b, is_random_next))
            gathered, length = [], 0
        i += 1
    return instances
