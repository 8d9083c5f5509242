"""``BertTokenizer``: basic tokenization + WordPiece + BERT's special-token layout."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

from bertkit.errors import BertkitError, DataFormatError
from bertkit.fileio import atomic_write
from bertkit.tokenizer.basic import BasicTokenizer, final_sigmas
from bertkit.tokenizer.chunks import ChunkCache
from bertkit.tokenizer.encoding import Encoding, truncated_lengths
from bertkit.tokenizer.settings import resolve_settings, saved_settings, vocab_tokens
from bertkit.tokenizer.vocab import SPECIAL_TOKENS, Vocab
from bertkit.tokenizer.wordpiece import (
    GOOGLE_MAX_INPUT_CHARS_PER_WORD,
    MAX_INPUT_CHARS_PER_WORD,
    WordPiece,
)

TextInput = str | Sequence[str]  # raw text, or a pre-tokenized list of words
_IDS = itemgetter(0)
# A longer text is tokenised in pieces cut at white space (the same ids: no word crosses white
# space), so that no single C call (the word regex, the id lookups) holds the GIL for long: a
# server tokenising a 5 MB text in a thread keeps answering other requests meanwhile.
LONG_TEXT_PIECE = 65536
_SPACE = re.compile(r"\s")


def whitespace_pieces(text: str, size: int = LONG_TEXT_PIECE) -> list[str]:
    """``text`` cut into pieces of about ``size`` characters, each cut at a white-space
    character (a piece may be longer when there is none); ``"".join`` gives ``text`` back."""
    pieces, start = [], 0
    while start < len(text):
        found = _SPACE.search(text, min(start + size, len(text)))
        end = found.start() if found and start + size < len(text) else len(text)
        pieces.append(text[start:end])
        start = end
    return pieces


class BertTokenizer:
    """The BERT WordPiece tokenizer, exact to Google's and Hugging Face's.

    ``lowercase`` selects an uncased vocabulary (lower-casing and, unless
    ``strip_accents`` says otherwise, accent stripping). Special tokens written in the text
    (``[MASK]``, ``[SEP]``...) are kept whole.

    The default is Hugging Face's behaviour. ``google_compat=True`` gives exactly the ids of
    Google's original ``tokenization.py`` (``FullTokenizer``), for rebuilding Google's
    pre-training data: the text is lower-cased as a whole (``ΟΔΟΣ`` -> ``ο ##δ ##ος``),
    accents are stripped after lower-casing, only Cc/Cf control characters are dropped,
    words of up to 200 characters (not 100) are segmented, and special tokens written in
    the text are split like any other text. It needs ``strip_accents`` to follow
    ``lowercase`` and ``split_cjk`` on, as Google has no such options.
    """

    def __init__(self, vocab: Vocab, lowercase: bool = True, strip_accents: bool | None = None,
                 split_cjk: bool = True, model_max_length: int = 512, google_compat: bool = False):
        self.vocab = vocab
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.split_cjk = split_cjk
        self.model_max_length = model_max_length
        self.google_compat = google_compat
        if google_compat and (self.strip_accents != lowercase or not split_cjk):
            raise ValueError("google_compat: Google's tokenizer strips accents exactly when it "
                             "lower-cases and always splits CJK characters")
        self.basic = BasicTokenizer(lowercase, self.strip_accents, split_cjk, google_compat)
        self.wordpiece = WordPiece(vocab, max_input_chars_per_word=(
            GOOGLE_MAX_INPUT_CHARS_PER_WORD if google_compat else MAX_INPUT_CHARS_PER_WORD))
        self._chunks = ChunkCache(self._words_with_offsets)
        ids = vocab.token_to_id
        self.pad_token_id, self.unk_token_id = ids["[PAD]"], ids["[UNK]"]
        self.cls_token_id, self.sep_token_id = ids["[CLS]"], ids["[SEP]"]
        self.mask_token_id = ids["[MASK]"]
        self.special_token_ids = frozenset(ids[t] for t in SPECIAL_TOKENS)
        self._special_re = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
        self._warned_length = False

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_file(cls, vocab_file: str | Path, lowercase: bool | None = None,
                  strip_accents: bool | None = None, split_cjk: bool | None = None,
                  **kwargs) -> BertTokenizer:
        """Build from a Google ``vocab.txt`` (or a directory holding one) with the normaliser
        settings saved beside it (:func:`~bertkit.tokenizer.settings.saved_settings`).

        ``lowercase``, ``strip_accents`` and ``split_cjk`` restate them (``None``: as saved;
        with nothing saved, uncased); one that contradicts the saved setting raises
        :class:`~bertkit.errors.OptionError` naming both.
        """
        vocab = Vocab.from_file(vocab_file)
        saved, source = saved_settings(vocab_file, vocab.tokens)
        settings = resolve_settings(saved, {"lowercase": lowercase, "strip_accents": strip_accents,
                                            "split_cjk": split_cjk}, source)
        return cls(vocab, **settings, **kwargs)

    @classmethod
    def from_pretrained(cls, directory: str | Path, lowercase: bool | None = None,
                        strip_accents: bool | None = None) -> BertTokenizer:
        """Load from a model directory: ``vocab.txt`` + ``tokenizer_config.json``.

        A Hugging Face directory with only a WordPiece ``tokenizer.json`` works too.
        ``lowercase``/``strip_accents`` restate the saved settings as in :meth:`from_file`.
        """
        directory = Path(directory)
        extra = {}
        config_file = directory / "tokenizer_config.json"
        if config_file.exists():
            try:
                extra = json.loads(config_file.read_text(encoding="utf-8"))
            except (ValueError, RecursionError) as e:
                raise DataFormatError(config_file, f"not a readable JSON file ({e})") from None
            if not isinstance(extra, dict):
                raise DataFormatError(config_file, "not a JSON object")
        if (directory / "vocab.txt").exists():
            vocab = Vocab.from_file(directory / "vocab.txt")
            if (directory / "tokenizer.json").exists():
                _check_same_vocab(vocab, directory)
        elif (directory / "tokenizer.json").exists():
            vocab = _read_tokenizer_json(directory / "tokenizer.json")
        else:
            raise FileNotFoundError(f"{directory}: no vocab.txt or tokenizer.json")
        saved, source = saved_settings(directory)
        given = {"lowercase": lowercase, "strip_accents": strip_accents}
        return cls(vocab, **resolve_settings(saved, given, source),
                   model_max_length=min(int(extra.get("model_max_length", 512)), 10**6),
                   google_compat=bool(extra.get("bertkit_google_compat", False)))

    @property
    def settings(self) -> dict:
        """The normaliser settings (``lowercase``, ``strip_accents``, ``split_cjk``)."""
        return {"lowercase": self.lowercase, "strip_accents": self.strip_accents,
                "split_cjk": self.split_cjk}

    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``vocab.txt``, a Hugging Face compatible ``tokenizer_config.json`` and the
        fast tokenizer's ``tokenizer.json`` (:meth:`tokenizer_json`), which
        text-embeddings-inference and ``tokenizers.Tokenizer.from_file`` load."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._write(directory / "vocab.txt")

    def save_vocabulary(self, vocab_file: str | Path) -> None:
        """Write the vocabulary to ``vocab_file`` and its settings beside it, in
        ``tokenizer_config.json`` and ``tokenizer.json`` (what :meth:`from_file` reads back).

        Settings files beside it that belong to another vocabulary (a ``tokenizer.json`` with
        other tokens) are not overwritten: :class:`~bertkit.errors.BertkitError`.
        """
        vocab_file = Path(vocab_file)
        _check_settings_files_free(vocab_file)
        self._write(vocab_file)

    def _write(self, vocab_file: Path) -> None:
        """``vocab_file`` and the two settings files in its folder (each atomically)."""
        folder = vocab_file.parent
        self.vocab.save(vocab_file)
        settings = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self.lowercase,
            "strip_accents": None if self.strip_accents == self.lowercase else self.strip_accents,
            "tokenize_chinese_chars": self.split_cjk,
            "model_max_length": self.model_max_length,
            "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
            "cls_token": "[CLS]", "mask_token": "[MASK]",
        }
        if self.google_compat:
            settings["bertkit_google_compat"] = True
        with atomic_write(folder / "tokenizer_config.json") as f:
            json.dump(settings, f, indent=2)
        with atomic_write(folder / "tokenizer.json") as f:
            json.dump(self.tokenizer_json(), f, ensure_ascii=False, indent=1)

    def tokenizer_json(self) -> dict:
        """This tokenizer in the Hugging Face ``tokenizers`` format: ``BertNormalizer`` (clean
        text, CJK split, lower-casing and accent stripping as here), ``BertPreTokenizer``,
        ``WordPiece`` over this vocabulary, ``[CLS] A [SEP] (B [SEP])`` with segment ids, and
        the special tokens kept whole. It gives this tokenizer's ids (tested on SST-2); a
        ``google_compat`` tokenizer differs from it where Google's differs from Hugging Face's."""
        ids = self.vocab.token_to_id
        cls, sep = "[CLS]", "[SEP]"

        def special(token: str, type_id: int) -> dict:
            return {"SpecialToken": {"id": token, "type_id": type_id}}

        def sequence(name: str, type_id: int) -> dict:
            return {"Sequence": {"id": name, "type_id": type_id}}

        return {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": ids[t], "content": t, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True}
                             for t in sorted(SPECIAL_TOKENS, key=ids.__getitem__)],
            "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": self.split_cjk,
                           "strip_accents": None if self.strip_accents == self.lowercase else self.strip_accents,
                           "lowercase": self.lowercase},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [special(cls, 0), sequence("A", 0), special(sep, 0)],
                "pair": [special(cls, 0), sequence("A", 0), special(sep, 0), sequence("B", 1), special(sep, 1)],
                "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in (cls, sep)}},
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": self.wordpiece.max_input_chars_per_word,
                      "vocab": dict(ids)},
        }

    # ----------------------------------------------------------------- basics
    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]):
        get, unk = self.vocab.token_to_id.get, self.unk_token_id
        if isinstance(tokens, str):
            return get(tokens, unk)
        return [get(t, unk) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int]):
        table = self.vocab.tokens
        if isinstance(ids, int):
            return table[ids]
        return [table[int(i)] for i in ids]

    def _segments(self, text: str) -> list[tuple[str, int]]:
        """Split out special tokens written in the text: ``(piece, start)`` pairs.

        In Google mode special tokens are not recognised in text: one piece, the text.
        """
        if "[" not in text or self.google_compat:
            return [(text, 0)]
        pieces, start = [], 0
        for piece in self._special_re.split(text):
            if piece:
                pieces.append((piece, start))
            start += len(piece)
        return pieces

    def text_to_ids(self, text: str) -> list[int]:
        """WordPiece ids of ``text`` without special tokens around it (the fast path)."""
        if len(text) > LONG_TEXT_PIECE and not (self.basic.final_sigma and "\u03a3" in text):
            return [i for piece in whitespace_pieces(text) for i in self._text_to_ids(piece)]
        return self._text_to_ids(text)

    def _text_to_ids(self, text: str) -> list[int]:
        wp, ids = self.wordpiece, self.vocab.token_to_id
        out: list[int] = []
        for piece, _ in self._segments(text):
            if piece in ids and piece in SPECIAL_TOKENS and not self.google_compat:
                out.append(ids[piece])
            else:
                out += chain.from_iterable(map(_IDS, map(wp.__getitem__, self.basic.words(piece))))
        return out

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of ``text`` (no ``[CLS]``/``[SEP]``)."""
        return self.convert_ids_to_tokens(self.text_to_ids(text))

    def text_to_ids_and_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` and each token's character span in ``text``.

        Each white-space chunk of the text is tokenized once and cached (``chunks.py``).
        """
        if self.basic.final_sigma and "\u03a3" in text:
            text = final_sigmas(text)  # Google's final sigma looks across the whole text
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        for piece, base in self._segments(text):
            if piece in SPECIAL_TOKENS and not self.google_compat:
                ids.append(self.vocab.token_to_id[piece])
                offsets.append((base, base + len(piece)))
            else:
                piece_ids, piece_offsets = self._chunks.ids_and_offsets(piece, base)
                ids += piece_ids
                offsets += piece_offsets
        return ids, offsets

    def _words_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` (no special tokens in it) and each token's span in ``text``,
        computed afresh; :meth:`text_to_ids_and_offsets` caches this per chunk."""
        words, spans, owner = self.basic.words_with_spans(text)
        entries = list(map(self.wordpiece.__getitem__, words))
        ids = list(chain.from_iterable(map(_IDS, entries)))
        if owner is None:
            return ids, [(s + a, s + b) for (s, _), (_, starts, ends) in zip(spans, entries)
                         for a, b in zip(starts, ends)]
        return ids, [(owner[s + a], owner[s + b - 1] + 1)
                     for (s, _), (_, starts, ends) in zip(spans, entries) for a, b in zip(starts, ends)]

    def _sequence(self, text: TextInput, offsets: bool) -> _Segment:
        """The tokens of one text or list of words (offsets and word ids when they apply)."""
        if isinstance(text, str):
            if offsets:
                return _Segment(*self.text_to_ids_and_offsets(text))
            return _Segment(self.text_to_ids(text))
        ids, offs, word_ids = [], [], []
        for index, word in enumerate(text):
            word_piece_ids, word_offsets = self.text_to_ids_and_offsets(word)
            ids.extend(word_piece_ids)
            offs.extend(word_offsets)
            word_ids.extend([index] * len(word_piece_ids))
        return _Segment(ids, offs if offsets else None, word_ids)

    # ----------------------------------------------------------------- encoding
    def encode(self, text: TextInput, pair: TextInput | None = None, max_length: int | None = None,
               truncation: str | None = "longest_first", padding: bool | str = False,
               return_offsets: bool = False, add_special_tokens: bool = True) -> Encoding:
        """Encode ``text`` (and ``pair``) into model inputs.

        ``max_length`` counts the special tokens. ``truncation`` is ``longest_first``,
        ``only_first``, ``only_second`` or ``None`` (then an over-long result is kept and a
        warning is issued). ``padding="max_length"`` pads to ``max_length``; ``"longest"``
        only matters in :meth:`encode_batch`. Text may be a list of words (pre-tokenized):
        then ``word_ids`` maps each token to its word and offsets are within each word.
        """
        a = self._sequence(text, return_offsets)
        b = self._sequence(pair, return_offsets) if pair is not None else None
        n_special = (3 if pair is not None else 2) if add_special_tokens else 0
        removed = 0
        if max_length is not None:
            budget = max_length - n_special
            if budget < 0:
                raise ValueError(f"max_length={max_length} leaves no room for {n_special} special tokens")
            total = len(a.ids) + (len(b.ids) if b is not None else 0)
            if total > budget:
                if truncation:
                    n1, n2 = truncated_lengths(len(a.ids), None if b is None else len(b.ids),
                                               budget, truncation)
                    removed = total - budget
                    a = a.cut(n1)
                    b = b.cut(n2) if b is not None else None
                elif not self._warned_length:
                    self._warned_length = True
                    warnings.warn(f"sequence of {total + n_special} tokens is longer than "
                                  f"max_length={max_length} and truncation is off", stacklevel=2)
        enc = self._assemble(a, b, add_special_tokens)
        enc.num_truncated = removed
        if padding == "max_length":
            if max_length is None:
                raise ValueError("padding='max_length' needs max_length")
            enc.pad(max_length, self.pad_token_id)
        elif padding not in (False, None, "longest", "do_not_pad"):
            raise ValueError(f"unknown padding {padding!r}; use False, 'max_length' or 'longest'")
        return enc

    def _assemble(self, a: _Segment, b: _Segment | None, specials: bool) -> Encoding:
        """``[CLS] a [SEP]`` (``+ b [SEP]``), or ``a (+ b)`` without specials, as an Encoding."""
        n_a = len(a.ids)
        if specials:
            edge, zero = [None], [(0, 0)]
            ids = [self.cls_token_id, *a.ids, self.sep_token_id]
            special = [1] + [0] * n_a + [1]
        else:
            edge, zero = [], []
            ids = list(a.ids)
            special = [0] * n_a
        seq_ids = edge + [0] * n_a + edge
        types = [0] * len(ids)
        if b is not None:
            n_b = len(b.ids)
            ids += b.ids
            ids += [self.sep_token_id] if specials else []
            special += [0] * n_b + ([1] if specials else [])
            seq_ids += [1] * n_b + edge
            types += [1] * (len(ids) - len(types))
        enc = Encoding(ids, types, [1] * len(ids), special, seq_ids)
        if a.offsets is not None:
            enc.offsets = zero + a.offsets + zero + ((b.offsets + zero) if b is not None else [])
        if a.word_ids is not None or (b is not None and b.word_ids is not None):
            a_w = a.word_ids if a.word_ids is not None else [None] * n_a
            b_w = [] if b is None else (b.word_ids if b.word_ids is not None else [None] * len(b.ids)) + edge
            enc.word_ids = edge + a_w + edge + b_w
        return enc

    def encode_batch(self, texts: Sequence[TextInput], pairs: Sequence[TextInput] | None = None,
                     padding: bool | str = False, **kwargs) -> list[Encoding]:
        """Encode many texts (and pairs) with the options of :meth:`encode`.

        ``padding="longest"`` pads every encoding to the longest one of the batch.
        """
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pairs")
        fixed = padding if padding == "max_length" else False
        if pairs is None:
            out = [self.encode(t, padding=fixed, **kwargs) for t in texts]
        else:
            out = [self.encode(t, p, padding=fixed, **kwargs) for t, p in zip(texts, pairs)]
        if padding == "longest" and out:
            longest = max(len(e) for e in out)
            for e in out:
                e.pad(longest, self.pad_token_id)
        return out

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool = True) -> str:
        """Text of ``ids``, as Hugging Face's ``BertTokenizer.decode``.

        ``##`` pieces are joined to the piece before, others are space-separated; then,
        with ``clean_up_tokenization_spaces`` (the default), the spaces tokenization put
        before ``. ? ! ,`` and around ``'`` in English contractions are removed
        (``unwanted , running`` -> ``unwanted, running``; ``don ' t`` -> ``don't``).
        ``clean_up_tokenization_spaces=False`` keeps the raw spacing.
        """
        words: list[str] = []
        for i in ids:
            i = int(i)
            if skip_special_tokens and i in self.special_token_ids:
                continue
            token = self.vocab.tokens[i]
            if token.startswith("##") and words:
                words[-1] += token[2:]
            else:
                words.append(token)
        text = " ".join(words)
        return clean_up_tokenization(text) if clean_up_tokenization_spaces else text


_CLEAN_UPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
              (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def clean_up_tokenization(text: str) -> str:
    """Hugging Face's clean-up of decoded text: each rule of ``_CLEAN_UPS`` in turn."""
    for old, new in _CLEAN_UPS:
        text = text.replace(old, new)
    return text


class _Segment(NamedTuple):
    """One side of an encoding before the special tokens: ids, and offsets / word ids when
    asked for (``None`` otherwise)."""

    ids: list[int]
    offsets: list[tuple[int, int]] | None = None
    word_ids: list[int] | None = None

    def cut(self, n: int) -> _Segment:
        """The first ``n`` tokens."""
        return _Segment(self.ids[:n], *(None if x is None else x[:n] for x in (self.offsets, self.word_ids)))


def _check_same_vocab(vocab: Vocab, directory: Path) -> None:
    """``vocab.txt`` and ``tokenizer.json`` of one directory must map ids to the same tokens:
    bertkit reads the first, TEI, ``tokenizers`` and sentence-transformers the second, so a
    replaced or reordered file would give each another model without a word."""
    other = _read_tokenizer_json(directory / "tokenizer.json")
    if other.tokens == vocab.tokens:
        return
    where = next((i for i, (a, b) in enumerate(zip(vocab.tokens, other.tokens, strict=False)) if a != b),
                 min(len(vocab), len(other)))
    said = (f"id {where} is {vocab.tokens[where]!r} in vocab.txt but {other.tokens[where]!r} in tokenizer.json"
            if where < min(len(vocab), len(other)) else f"{len(vocab)} tokens in vocab.txt, {len(other)} in tokenizer.json")
    raise BertkitError(f"{directory}: vocab.txt and tokenizer.json disagree ({said}): one of them was replaced; "
                       "bertkit reads vocab.txt, TEI and sentence-transformers tokenizer.json. Restore the one the "
                       "model was trained with (or remove the other)")


def _read_tokenizer_json(path: Path) -> Vocab:
    """Vocabulary of a Hugging Face WordPiece ``tokenizer.json``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        model = data["model"]
        if model.get("type") != "WordPiece":
            raise DataFormatError(path, f"not a WordPiece tokenizer (model type {model.get('type')!r})")
        tokens = vocab_tokens(data)
        if tokens is None:
            raise KeyError("vocab")
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise DataFormatError(path, f"not a Hugging Face tokenizer.json ({e})") from None
    return Vocab(tokens, source=str(path))


def _check_settings_files_free(vocab_file: Path) -> None:
    """Refuse to write settings beside ``vocab_file`` over those of another vocabulary: a
    ``tokenizer.json`` there whose tokens are not those of the file now at ``vocab_file``."""
    beside = vocab_file.parent / "tokenizer.json"
    if not beside.is_file():
        return
    try:
        theirs = vocab_tokens(json.loads(beside.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        theirs = None
    try:
        ours = Vocab.from_file(vocab_file).tokens if vocab_file.is_file() else None
    except DataFormatError:
        ours = None
    if theirs is not None and theirs != ours:
        raise BertkitError(f"{beside}: holds the settings of another vocabulary; write "
                           f"{vocab_file.name} into a folder of its own (the settings are saved "
                           "beside the vocabulary as tokenizer.json and tokenizer_config.json)")
