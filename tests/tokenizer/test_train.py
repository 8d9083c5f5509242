"""Vocabulary training on tiny corpora the tests make (and, when present, real text)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from bertkit.cli.main import main
from bertkit.tokenizer import SPECIAL_TOKENS, BertTokenizer, Vocab
from bertkit.tokenizer.train import choose_alphabet, count_words, tokens_per_word, train_wordpiece

from .recount_reference import recount_train

CORPUS = ["the quick brown fox jumps over the lazy dog.",
          "the dog sleeps; the fox runs quickly.", "Quickly, quickly: the foxes jumped!"] * 20


def test_special_tokens_first_size_and_determinism():
    counts = count_words(CORPUS, progress=False)
    vocab = train_wordpiece(counts, 60, progress=False)
    assert vocab.tokens[:5] == list(SPECIAL_TOKENS)
    assert len(vocab) == 60
    assert train_wordpiece(counts, 60, progress=False).tokens == vocab.tokens
    # Frequent whole words are learned; every corpus word still segments without [UNK].
    assert "the" in vocab.token_to_id
    tok = BertTokenizer(vocab)
    assert tok.unk_token_id not in tok.text_to_ids(" ".join(CORPUS))


def test_more_tokens_mean_fewer_pieces_per_word():
    counts = count_words(CORPUS, progress=False)
    small = tokens_per_word(train_wordpiece(counts, 40, progress=False), counts)
    large = tokens_per_word(train_wordpiece(counts, 80, progress=False), counts)
    assert large < small


def test_cli_train_writes_vocab(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS), encoding="utf-8")
    out = tmp_path / "vocab.txt"
    assert main(["tokenizer", "train", "--corpus", str(corpus), "--vocab-size", "50",
                 "--output", str(out)]) == 0
    assert len(Vocab.from_file(out)) == 50
    assert "tokens per corpus word" in capsys.readouterr().out


def synthetic_counts(seed: int, n_words: int = 3000) -> Counter:
    """Word counts of a made-up language: syllables of a small alphabet (with some accents
    and Hangul), Zipf-like frequencies, so that pairs tie and merges compete."""
    rng = random.Random(seed)
    syllables = [a + b for a in "bdgkmnprst" for b in "aeiouáé"] + list("한국어말글")
    counts: Counter = Counter()
    for rank in range(1, n_words + 1):
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(1, 5)))
        counts[word] += max(1, 2000 // rank)
    return counts


@pytest.mark.parametrize("seed,size", [(0, 300), (1, 1200), (2, 4000)])
def test_incremental_trainer_equals_full_recounts(seed, size):
    counts = synthetic_counts(seed)
    assert train_wordpiece(counts, size, progress=False).tokens == recount_train(counts, size)


def test_incremental_trainer_equals_full_recounts_on_real_text():
    from ..conftest import shared_path

    path = shared_path("corpus", "python-docs.txt")
    with open(path, encoding="utf-8") as f:
        lines = [next(f) for _ in range(5000)]
    counts = count_words(lines, progress=False)
    assert train_wordpiece(counts, 2000, progress=False).tokens == recount_train(counts, 2000)


def test_every_character_is_a_word_start_and_a_continuation():
    counts = Counter({"zab": 5, "ab": 9, "ba": 7})  # z only starts a word, never continues
    vocab = train_wordpiece(counts, 40, progress=False)
    assert {"z", "##z", "a", "##a", "b", "##b"} <= set(vocab.tokens)
    tok = BertTokenizer(vocab)
    assert tok.unk_token_id not in tok.text_to_ids("abz baz")


def test_limited_alphabet_says_what_it_leaves_out():
    counts = Counter({"aaa": 10, "ab": 5, "c": 1})
    alphabet = choose_alphabet(counts, 1)
    assert alphabet.chars == {"a"} and alphabet.dropped == 2 and alphabet.dropped_words == 6
    assert "2 rarer ones left out, in 6 corpus words (37.500%)" in alphabet.summary()
    vocab = train_wordpiece(counts, 20, max_alphabet=1, progress=False)
    assert "b" not in vocab.tokens and "##b" not in vocab.tokens
    whole = choose_alphabet(counts)  # the default: every character
    assert whole.chars == {"a", "b", "c"} and whole.dropped_words == 0


def test_cli_limit_alphabet_and_summary(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS + ["zzz"]), encoding="utf-8")
    assert main(["tokenizer", "train", "--corpus", str(corpus), "--vocab-size", "80",
                 "--limit-alphabet", "10", "--output", str(tmp_path / "v.txt")]) == 0
    out = capsys.readouterr().out
    assert "alphabet: 10 characters" in out and "become [UNK]" in out
    assert "##z" not in Vocab.from_file(tmp_path / "v.txt").tokens
