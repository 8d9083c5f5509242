"""``pretrain-data`` and ``pretrain`` read the tokenizer settings saved with the vocabulary:
no flag needs repeating, and a flag that contradicts them is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertkit.cli.main import main
from bertkit.errors import OptionError
from bertkit.pretraining.setup import build_tokenizer
from bertkit.pretraining.train_config import PretrainConfig

SENTENCES = ["대한민국은 민주공화국이다.", "대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.",
             "Café Zürich meets the Crowd.", "모든 국민은 법 앞에 평등하다.", "The crowd and the CAFÉ.",
             "국가는 전통문화의 계승·발전과 민족문화의 창달에 노력하여야 한다."]


@pytest.fixture(scope="module")
def cased(tmp_path_factory):
    """A corpus of 12 documents and a cased vocabulary trained on it (settings saved beside)."""
    root = tmp_path_factory.mktemp("cased")
    docs = ["\n".join(SENTENCES[(d + i) % len(SENTENCES)] for i in range(5)) for d in range(12)]
    (root / "corpus.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    assert main(["tokenizer", "train", "--corpus", str(root / "corpus.txt"), "--vocab-size", "400",
                 "--cased", "--output", str(root / "vocab"), "--no-progress"]) == 0
    return root


def make_data(root, name, *flags):
    out = root / name
    code = main(["pretrain-data", "--input", str(root / "corpus.txt"), "--vocab",
                 str(root / "vocab" / "vocab.txt"), "--output", str(out), "--max-seq-length", "32",
                 "--dupe-factor", "2", "--no-progress", *flags])
    return code, out


def arrays(directory):
    return {p.name: np.load(p) for p in sorted(directory.glob("*.npy"))}


def test_no_flag_gives_the_instances_the_flags_give(cased):
    assert make_data(cased, "plain")[0] == 0
    assert make_data(cased, "flags", "--cased", "--no-strip-accents")[0] == 0
    plain, flags = arrays(cased / "plain"), arrays(cased / "flags")
    assert plain and plain.keys() == flags.keys()
    for name in plain:
        assert np.array_equal(plain[name], flags[name]), name
    meta = json.loads((cased / "plain" / "meta.json").read_text(encoding="utf-8"))
    assert meta["settings"]["lowercase"] is False and meta["settings"]["strip_accents"] is False
    ids = plain[next(iter(plain))]
    assert ids.size and not (ids == 1).any()  # no [UNK] (id 1) anywhere


def test_a_contradicting_flag_is_refused(cased, capsys):
    code, out = make_data(cased, "lower", "--lowercase")
    assert code == 1 and not (out / "meta.json").exists()
    err = capsys.readouterr().err
    assert "--lowercase contradicts the setting lowercase=false saved in" in err


def test_pretrain_takes_the_settings_and_checks_the_flags(cased):
    assert make_data(cased, "data")[0] == 0
    meta = json.loads((cased / "data" / "meta.json").read_text(encoding="utf-8"))
    vocab = str(cased / "vocab" / "vocab.txt")
    tok = build_tokenizer(PretrainConfig(data=str(cased / "data"), vocab=vocab), meta)
    assert not tok.lowercase and not tok.strip_accents
    with pytest.raises(OptionError, match="--lowercase contradicts the setting lowercase=false "
                                          "saved in .*meta.json"):
        build_tokenizer(PretrainConfig(data=str(cased / "data"), vocab=vocab, lowercase=True), meta)
    # data made with a setting the vocabulary's saved files contradict
    made_uncased = {**meta, "settings": {**meta["settings"], "lowercase": True, "strip_accents": True}}
    with pytest.raises(OptionError, match="contradicts the setting lowercase=false saved in "
                                          ".*tokenizer_config.json"):
        build_tokenizer(PretrainConfig(data=str(cased / "data"), vocab=vocab), made_uncased)


def test_a_vocabulary_that_does_not_fit_is_refused_then_warned(cased, tmp_path, capsys):
    bare = tmp_path / "bare.txt"  # the cased vocabulary without its settings files
    bare.write_text((cased / "vocab" / "vocab.txt").read_text(encoding="utf-8"), encoding="utf-8")
    args = ["pretrain-data", "--input", str(cased / "corpus.txt"), "--vocab", str(bare),
            "--max-seq-length", "32", "--dupe-factor", "1", "--no-progress"]
    assert main([*args, "--output", str(tmp_path / "refused")]) == 1
    err = capsys.readouterr().err
    assert "of the tokens of the first lines of the corpus" in err and "--cased" in err
    assert "likely the casing" in err and "--allow-unknown" in err
    assert not (tmp_path / "refused" / "meta.json").exists()
    with pytest.warns(UserWarning, match="of the tokens of the corpus .* are \\[UNK\\]: likely the casing"):
        assert main([*args, "--output", str(tmp_path / "allowed"), "--allow-unknown"]) == 0
    summary = json.loads((tmp_path / "allowed" / "meta.json").read_text(encoding="utf-8"))["summary"]
    assert summary["unknown_share"] > 0.3 and "--cased" in summary["unknown_cause"]
    assert "unknown" in capsys.readouterr().out
    assert main([*args, "--output", str(tmp_path / "fits"), "--cased"]) == 0
    fits = json.loads((tmp_path / "fits" / "meta.json").read_text(encoding="utf-8"))["summary"]
    assert fits["unknown_share"] == 0 and "unknown_cause" not in fits
