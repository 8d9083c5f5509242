"""The normaliser settings travel with the vocabulary: ``tokenizer train`` writes them beside
``vocab.txt`` in the files Hugging Face reads, every reader takes them from there, and a flag
that contradicts them is an error naming both."""

from __future__ import annotations

import json

import pytest

from bertkit.cli.main import main
from bertkit.errors import OptionError
from bertkit.tokenizer import BertTokenizer, Vocab
from bertkit.tokenizer.settings import resolve_settings, saved_settings

CORPUS = ["Café Zürich GmbH meets the Café crowd.", "The Crowd and the café.",
          "대한민국은 민주공화국이다.", "대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다."] * 10


def test_resolve_fills_and_refuses():
    assert resolve_settings({}, {}) == {"lowercase": True, "strip_accents": True, "split_cjk": True}
    assert resolve_settings({}, {"lowercase": False})["strip_accents"] is False
    saved = {"lowercase": True, "strip_accents": False, "split_cjk": True}
    assert resolve_settings(saved, {"lowercase": True}) == saved
    with pytest.raises(OptionError, match=r"--cased/--no-lowercase contradicts the setting "
                                          r"lowercase=true saved in X"):
        resolve_settings(saved, {"lowercase": False}, "X")
    with pytest.raises(OptionError, match="--strip-accents contradicts the setting strip_accents=false"):
        resolve_settings(saved, {"strip_accents": True}, "X")
    # strip_accents saved as None follows the saved lowercase
    with pytest.raises(OptionError, match=r"strip_accents=true saved in X \(it follows lowercase=true\)"):
        resolve_settings({"lowercase": True, "strip_accents": None}, {"strip_accents": False}, "X")


def train(tmp_path, output, *flags):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS), encoding="utf-8")
    return main(["tokenizer", "train", "--corpus", str(corpus), "--vocab-size", "300",
                 "--output", str(output), "--no-progress", *flags])


def test_train_writes_the_settings_files_that_readers_use(tmp_path, capsys):
    assert train(tmp_path, tmp_path / "vocab.txt", "--cased") == 0
    assert "lowercase=False, strip_accents=False" in capsys.readouterr().out
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["do_lower_case"] is False
    normalizer = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))["normalizer"]
    assert normalizer["lowercase"] is False
    tok = BertTokenizer.from_file(tmp_path / "vocab.txt")  # no flag: the saved setting
    assert not tok.lowercase and not tok.strip_accents
    assert "Café" in tok.tokenize("Café") and tok.unk_token_id not in tok.text_to_ids(CORPUS[2])
    assert not BertTokenizer.from_pretrained(tmp_path).lowercase


def test_tokenize_takes_the_saved_setting_and_refuses_a_contradicting_flag(tmp_path, capsys):
    assert train(tmp_path, tmp_path / "vocab.txt", "--cased") == 0
    capsys.readouterr()
    vocab = str(tmp_path / "vocab.txt")
    assert main(["tokenize", "--vocab", vocab, "--json", "대한민국은 민주공화국이다."]) == 0
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    assert "[UNK]" not in tokens and tokens[1].startswith("대한민국")
    assert main(["tokenize", "--vocab", vocab, "--cased", "Café"]) == 0  # restating is fine
    capsys.readouterr()
    assert main(["tokenize", "--vocab", vocab, "--lowercase", "Café"]) == 1
    err = capsys.readouterr().err
    assert "--lowercase contradicts the setting lowercase=false saved in" in err
    assert "tokenizer_config.json" in err


def test_lowercase_keeping_accents(tmp_path):
    assert train(tmp_path, tmp_path / "out", "--no-strip-accents") == 0
    tok = BertTokenizer.from_pretrained(tmp_path / "out")
    assert tok.lowercase and not tok.strip_accents
    assert tok.tokenize("CAFÉ")[0] == "café"
    # Hangul syllables stay whole (no NFD into jamo): the setting for mixed Korean and Latin text
    assert tok.tokenize("민주공화국")[0].startswith("민")


def test_uncased_default_decomposes_hangul(tmp_path):
    assert train(tmp_path, tmp_path / "out") == 0
    tok = BertTokenizer.from_pretrained(tmp_path / "out")
    assert tok.lowercase and tok.strip_accents
    assert all("\u1100" <= c <= "\u11ff" for t in tok.tokenize("민주") for c in t.removeprefix("##"))


def test_a_second_vocabulary_in_the_same_folder_is_refused(tmp_path, capsys):
    assert train(tmp_path, tmp_path / "cased.txt", "--cased") == 0
    assert train(tmp_path, tmp_path / "cased.txt", "--cased") == 0  # the same file again: fine
    capsys.readouterr()
    assert train(tmp_path, tmp_path / "uncased.txt") == 1
    assert "holds the settings of another vocabulary" in capsys.readouterr().err
    assert not (tmp_path / "uncased.txt").exists()


def test_settings_of_another_vocabulary_are_not_taken(tmp_path):
    assert train(tmp_path, tmp_path / "vocab.txt", "--cased") == 0
    other = tmp_path / "other.txt"
    other.write_text("\n".join(Vocab.from_file(tmp_path / "vocab.txt").tokens[:-1]) + "\n", encoding="utf-8")
    assert saved_settings(other) == ({}, None)
    assert BertTokenizer.from_file(other).lowercase  # nothing saved for it: uncased
    settings, source = saved_settings(tmp_path / "vocab.txt")
    assert settings["lowercase"] is False and source.name == "tokenizer_config.json"


def test_hugging_face_reads_the_saved_settings(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    assert train(tmp_path, tmp_path / "vocab.txt", "--no-strip-accents") == 0
    fast = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ours = BertTokenizer.from_file(tmp_path / "vocab.txt")
    for text in ["CAFÉ Zürich", *CORPUS[:4]]:
        assert fast.encode(text).ids == ours.encode(text).input_ids
