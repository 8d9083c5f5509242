"""WordPiece: greedy longest-match-first segmentation of one word into vocabulary pieces."""

from __future__ import annotations

from bertkit.tokenizer.vocab import Vocab

MAX_INPUT_CHARS_PER_WORD = 100  # Hugging Face's; Google's tokenization.py uses 200
GOOGLE_MAX_INPUT_CHARS_PER_WORD = 200


class WordPiece(dict):
    """``wordpiece[word]`` -> ``(ids, starts, ends)``: piece ids and their spans in the word.

    A word longer than ``max_input_chars_per_word`` characters, or with no segmentation
    into vocabulary pieces, becomes the single ``[UNK]`` piece spanning the whole word.
    Results are cached, so each distinct word is segmented once.
    """

    def __init__(self, vocab: Vocab, unk_token: str = "[UNK]",
                 max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD):
        super().__init__()
        self.vocab = vocab.token_to_id
        self.unk_id = vocab[unk_token]
        self.max_input_chars_per_word = max_input_chars_per_word
        self.max_piece_chars = max(len(t) for t in vocab.tokens)

    def __missing__(self, word: str) -> tuple[tuple[int, ...], ...]:
        result = self.segment(word)
        if len(self) < 1_000_000:  # bound the cache on unbounded vocabularies of words
            self[word] = result
        return result

    def segment(self, word: str, continuation: bool = False) -> tuple[tuple[int, ...], ...]:
        """Segment ``word``; with ``continuation`` it continues a word, so its first piece is
        a ``##`` piece too (how a ``##`` token splits under a vocabulary)."""
        n = len(word)
        if n > self.max_input_chars_per_word:
            return (self.unk_id,), (0,), (n,)
        vocab = self.vocab
        ids: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        start = 0
        while start < n:
            end = min(n, start + self.max_piece_chars)
            prefix = "##" if start or continuation else ""
            while end > start:
                piece_id = vocab.get(prefix + word[start:end])
                if piece_id is not None:
                    break
                end -= 1
            else:
                return (self.unk_id,), (0,), (n,)
            ids.append(piece_id)
            starts.append(start)
            start = end
            ends.append(end)
        return tuple(ids), tuple(starts), tuple(ends)
