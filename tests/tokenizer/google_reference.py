"""Test-only reference: the algorithm of Google's original BERT ``tokenization.py``.

Written from a reading of google-research/bert ``tokenization.py`` (``FullTokenizer`` =
``BasicTokenizer`` + ``WordpieceTokenizer``), kept in its shape (clean the text, pad CJK
characters, split on white space, then per token: ``str.lower()``, strip accents after
lower-casing, split on punctuation; WordPiece with ``max_input_chars_per_word=200``) so
that it can be compared line by line. Deliberately slow and straightforward.
"""

from __future__ import annotations

import unicodedata


def load_vocab(path) -> dict[str, int]:
    vocab = {}
    with open(path, encoding="utf-8") as reader:
        for index, line in enumerate(reader):
            vocab[line.strip()] = index
    return vocab


def whitespace_tokenize(text):
    text = text.strip()
    return text.split() if text else []


def _is_whitespace(char):
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    cp = ord(char)
    if (33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126):
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or (0x20000 <= cp <= 0x2A6DF)
            or (0x2A700 <= cp <= 0x2B73F) or (0x2B740 <= cp <= 0x2B81F)
            or (0x2B820 <= cp <= 0x2CEAF) or (0xF900 <= cp <= 0xFAFF)
            or (0x2F800 <= cp <= 0x2FA1F))


class GoogleBasicTokenizer:
    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        text = self._clean_text(text)
        text = self._tokenize_chinese_chars(text)
        split_tokens = []
        for token in whitespace_tokenize(text):
            if self.do_lower_case:
                token = token.lower()
                token = self._run_strip_accents(token)
            split_tokens.extend(self._run_split_on_punc(token))
        return whitespace_tokenize(" ".join(split_tokens))

    @staticmethod
    def _run_strip_accents(text):
        text = unicodedata.normalize("NFD", text)
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    @staticmethod
    def _run_split_on_punc(text):
        output, start_new_word = [], True
        for char in text:
            if _is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        return ["".join(x) for x in output]

    @staticmethod
    def _tokenize_chinese_chars(text):
        return "".join(f" {c} " if _is_chinese_char(ord(c)) else c for c in text)

    @staticmethod
    def _clean_text(text):
        output = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or _is_control(char):
                continue
            output.append(" " if _is_whitespace(char) else char)
        return "".join(output)


class GoogleWordpieceTokenizer:
    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        self.vocab, self.unk_token = vocab, unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        output_tokens = []
        for token in whitespace_tokenize(text):
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue
            is_bad, start, sub_tokens = False, 0, []
            while start < len(chars):
                end, cur_substr = len(chars), None
                while start < end:
                    substr = "".join(chars[start:end])
                    if start > 0:
                        substr = "##" + substr
                    if substr in self.vocab:
                        cur_substr = substr
                        break
                    end -= 1
                if cur_substr is None:
                    is_bad = True
                    break
                sub_tokens.append(cur_substr)
                start = end
            if is_bad:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(sub_tokens)
        return output_tokens


class GoogleFullTokenizer:
    def __init__(self, vocab: dict[str, int], do_lower_case=True):
        self.vocab = vocab
        self.basic_tokenizer = GoogleBasicTokenizer(do_lower_case)
        self.wordpiece_tokenizer = GoogleWordpieceTokenizer(vocab)

    def tokenize(self, text):
        return [sub for token in self.basic_tokenizer.tokenize(text)
                for sub in self.wordpiece_tokenizer.tokenize(token)]

    def ids(self, text) -> list[int]:
        return [self.vocab[t] for t in self.tokenize(text)]
