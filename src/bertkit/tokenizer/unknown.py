"""How much of a text a vocabulary does not know: the ``[UNK]`` rate, and its likely cause.

A high ``[UNK]`` rate is nearly always a mismatch, not rare words: a cased vocabulary read
with lower-casing (which also decomposes Hangul syllables into jamo), accents stripped or
kept against the vocabulary, or a vocabulary of another language or script.

Contract:

* :func:`unknown_report(tokenizer, texts) <unknown_report>` tokenizes ``texts`` (without
  special tokens) and returns an :class:`UnknownReport`: WordPiece tokens, ``[UNK]`` tokens,
  and, when there are any, the likely cause in words, found by re-tokenizing the texts that
  hold ``[UNK]`` with the other casing and accent settings over the same vocabulary and by
  looking for the scripts of the characters the vocabulary lacks.
* :func:`warn_unknown(report, what) <warn_unknown>` issues a ``UserWarning`` (printed as
  ``bertkit: warning: ...`` by the CLI) when the rate exceeds :data:`WARN_RATE`, and
  returns the message (None below it).
* :data:`REFUSE_RATE`: the rate above which ``pretrain-data`` stops unless told to go on.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

WARN_RATE = 0.02  # a few percent: more than rare words ever give
REFUSE_RATE = 0.10
_DIAGNOSE_TEXTS = 200  # texts holding [UNK] re-tokenized to find the cause


class UnknownReport(NamedTuple):
    """``unknown`` of ``tokens`` WordPiece tokens were ``[UNK]``; ``cause`` says why (or None)."""

    tokens: int
    unknown: int
    cause: str | None = None

    @property
    def rate(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0

    def message(self, what: str = "the text") -> str:
        """``12.5% of the tokens of the text (3 of 24) are [UNK]: <cause>``."""
        text = (f"{self.rate:.1%} of the tokens of {what} ({self.unknown:,} of {self.tokens:,}) "
                "are [UNK]")
        return f"{text}: {self.cause}" if self.cause else text


def unknown_report(tokenizer, texts: Iterable[str]) -> UnknownReport:
    """Count the ``[UNK]`` tokens of ``texts`` under ``tokenizer`` and find the likely cause."""
    unk = tokenizer.unk_token_id
    tokens = unknown = 0
    holding: list[str] = []
    for text in texts:
        ids = tokenizer.text_to_ids(text)
        tokens += len(ids)
        n = ids.count(unk)
        if n:
            unknown += n
            if len(holding) < _DIAGNOSE_TEXTS:
                holding.append(text)
    cause = likely_cause(tokenizer, holding) if unknown else None
    return UnknownReport(tokens, unknown, cause)


def _rate(tokenizer, texts: list[str]) -> float:
    ids = [i for text in texts for i in tokenizer.text_to_ids(text)]
    return ids.count(tokenizer.unk_token_id) / max(1, len(ids))


def likely_cause(tokenizer, texts: list[str]) -> str:
    """Why ``texts`` (which hold ``[UNK]``) are not known: casing, accents, or characters of
    a script the vocabulary lacks; in words a user can act on."""
    from bertkit.tokenizer.tokenizer import BertTokenizer

    now = _rate(tokenizer, texts)
    lower, strip = tokenizer.lowercase, tokenizer.strip_accents
    trials = [  # (settings, the flags that give them)
        ((not lower, not lower), "--cased" if lower else "--lowercase"),
        ((lower, not strip), "--no-strip-accents" if strip else "--strip-accents"),
    ]
    best = None
    for (lowercase, strip_accents), flags in trials:
        other = BertTokenizer(tokenizer.vocab, lowercase=lowercase, strip_accents=strip_accents,
                              split_cjk=tokenizer.split_cjk)
        rate = _rate(other, texts)
        if rate < now / 2 and (best is None or rate < best[0]):
            best = (rate, flags, lowercase, strip_accents)
    if best is not None:
        rate, flags, lowercase, strip_accents = best
        kind = "casing" if lowercase != lower else "accents"
        return (f"likely the {kind}: the text is read with lowercase={lower}, "
                f"strip_accents={strip}, but the vocabulary looks made with lowercase={lowercase}, "
                f"strip_accents={strip_accents} (read that way, the texts holding [UNK] have {rate:.1%} [UNK] "
                f"instead of {now:.1%}); use the vocabulary's saved settings or {flags}")
    return _missing_characters(tokenizer, texts)


def _script(char: str) -> str:
    """The first word of the character's Unicode name (``HANGUL``, ``CJK``, ``LATIN``...)."""
    return unicodedata.name(char, "UNKNOWN").split()[0]


def _missing_characters(tokenizer, texts: list[str]) -> str:
    known = tokenizer.vocab.token_to_id
    missing: Counter = Counter()
    for text in texts:
        for word in tokenizer.basic.words(text):
            for char in word:
                if char not in known and "##" + char not in known:
                    missing[char] += 1
    if not missing:
        return "the words are made of known characters but cannot be segmented (long words?)"
    scripts = Counter()
    for char, n in missing.items():
        scripts[_script(char)] += n
    script = scripts.most_common(1)[0][0]
    in_vocab = sum(1 for token in known for c in token.removeprefix("##") if _script(c) == script)
    shown = " ".join(c for c, _ in missing.most_common(8))
    if in_vocab == 0:
        return (f"the vocabulary has no {script} characters (missing: {shown}): it was made for "
                "another language; train one on this text (bertkit tokenizer train)")
    return (f"characters missing from the vocabulary: {shown} ({script}); a vocabulary trained "
            "on text like this (with every character: bertkit tokenizer train) would know them")


def warn_unknown(report: UnknownReport, what: str = "the text", threshold: float = WARN_RATE) -> str | None:
    """Warn (``UserWarning``) when ``report``'s rate exceeds ``threshold``; return the message."""
    if report.rate <= threshold:
        return None
    message = report.message(what)
    warnings.warn(message, UserWarning, stacklevel=2)
    return message
