"""Basic tokenization of BERT: text cleaning, CJK splitting, accents, case, punctuation.

The text is normalised one character at a time (each result is cached), which keeps an
exact map from every normalised character back to the original one for offsets:

* ``\\0``, U+FFFD and control characters (Unicode category C*, except tab, newline and
  carriage return) are dropped; every white-space character becomes a space;
* CJK ideographs are surrounded by spaces, so each is a word of its own;
* uncased: NFD decomposition, non-spacing marks (Mn) removed, then lower-casing;
* punctuation (ASCII symbol ranges and Unicode P*) is surrounded by spaces, so each
  punctuation character is a word of its own.

Words are then the runs of non-space characters. This is the reference BERT behaviour
of Hugging Face ``tokenizers`` (``BertNormalizer`` + ``BertPreTokenizer``).

``google_compat=True`` reproduces Google's original ``tokenization.py`` instead, which
differs in three ways: only control characters of category Cc and Cf are dropped
(private-use and unassigned code points are kept); the text is lower-cased as a whole
(``str.lower()``, so a capital sigma ending a word becomes the final sigma ``ς``) and
accents are stripped after lower-casing, not before.
"""

from __future__ import annotations

import re
import unicodedata

# ASCII characters BERT treats as punctuation even when Unicode does not (e.g. ``$``, ``^``).
_ASCII_PUNCT = "!-/:-@\\[-`{-~"
ASCII_WORD_RE = re.compile(f"[^\\s{_ASCII_PUNCT}]+|[{_ASCII_PUNCT}]")
# Characters that make the ASCII fast path unsafe: controls are dropped (joining words).
_ASCII_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_WORD_RE = re.compile("[^ ]+")

_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_cjk(char: str) -> bool:
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def is_control(char: str) -> bool:
    if char in "\t\n\r":
        return False
    return unicodedata.category(char).startswith("C")


def is_google_control(char: str) -> bool:
    """Google's ``_is_control``: categories Cc and Cf, except tab, newline, carriage return."""
    return char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf")


def is_blank(text: str) -> bool:
    """Whether ``text`` is empty once cleaned: nothing but white space and characters the
    cleaning drops (``\\0``, U+FFFD, control and format characters such as zero-width
    spaces). Such a text tokenizes to no word at all; every entry point refuses it alike."""
    return all(c in "\0\ufffd" or is_control(c) or is_whitespace(c) for c in text)


def final_sigmas(text: str) -> str:
    """``text`` with each capital sigma that Google's lower-casing turns into the final
    sigma replaced by ``ς`` (same length, so character offsets are unchanged).

    Google lower-cases the cleaned text (dropped characters removed) with ``str.lower()``,
    whose Final_Sigma rule looks at the neighbouring characters; the rule is applied here
    by Python itself on that cleaned text.
    """
    kept = [i for i, c in enumerate(text) if c not in "\0\ufffd" and not is_google_control(c)]
    cleaned = "".join(text[i] for i in kept)
    lowered = cleaned.lower()
    out, at = list(text), 0
    for i, char in zip(kept, cleaned):
        if char == "\u03a3" and lowered[at] == "\u03c2":
            out[i] = "\u03c2"
        at += len(char.lower())
    return "".join(out)


def is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or char.isspace()


def is_punctuation(char: str) -> bool:
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


class CharNormalizer(dict):
    """``normalizer[char]`` -> the normalised, space-padded string for one character."""

    def __init__(self, lowercase: bool, strip_accents: bool, split_cjk: bool = True,
                 google_compat: bool = False):
        super().__init__()
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.split_cjk = split_cjk
        self.google_compat = google_compat

    def __missing__(self, char: str) -> str:
        self[char] = result = self._normalize(char)
        return result

    def _normalize(self, char: str) -> str:
        dropped = is_google_control if self.google_compat else is_control
        if char == "\0" or char == "\ufffd" or dropped(char):
            return ""
        if is_whitespace(char):
            return " "
        if self.split_cjk and is_cjk(char):
            return f" {char} "
        text = char
        lower_first = self.google_compat  # Google lower-cases, then strips accents
        if self.lowercase and lower_first:
            text = text.lower()
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text)
                           if unicodedata.category(c) != "Mn")
        if self.lowercase and not lower_first:
            text = "".join(c.lower() for c in text)
        return "".join(f" {c} " if is_punctuation(c) else c for c in text)


class BasicTokenizer:
    """Split text into normalised words, with character spans into the original text."""

    def __init__(self, lowercase: bool = True, strip_accents: bool | None = None,
                 split_cjk: bool = True, google_compat: bool = False):
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.chars = CharNormalizer(lowercase, self.strip_accents, split_cjk, google_compat)
        self.final_sigma = google_compat and lowercase

    def words(self, text: str) -> list[str]:
        """Normalised words of ``text``."""
        if text.isascii() and not _ASCII_CONTROL_RE.search(text):
            return ASCII_WORD_RE.findall(text.lower() if self.lowercase else text)
        if self.final_sigma and "\u03a3" in text:
            text = final_sigmas(text)
        chars = self.chars
        return "".join([chars[c] for c in text]).split()

    def words_with_spans(self, text: str) -> tuple[list[str], list[tuple[int, int]], list[int] | None]:
        """Words, each word's span in the normalised text, and a normalised->original map.

        The map is ``None`` when normalised and original indices coincide.
        """
        if text.isascii() and not _ASCII_CONTROL_RE.search(text):
            matches = list(ASCII_WORD_RE.finditer(text.lower() if self.lowercase else text))
            return list(map(re.Match.group, matches)), list(map(re.Match.span, matches)), None
        if self.final_sigma and "\u03a3" in text:
            text = final_sigmas(text)
        chars = self.chars
        pieces = [chars[c] for c in text]
        owner = [i for i, piece in enumerate(pieces) for _ in piece]
        matches = list(_WORD_RE.finditer("".join(pieces)))
        return list(map(re.Match.group, matches)), list(map(re.Match.span, matches)), owner
