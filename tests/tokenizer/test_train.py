"""Vocabulary training on a tiny corpus the test writes."""

from __future__ import annotations

from bertkit.cli.main import main
from bertkit.tokenizer import SPECIAL_TOKENS, BertTokenizer, Vocab
from bertkit.tokenizer.train import count_words, tokens_per_word, train_wordpiece

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
