"""``bertkit fill-mask`` / ``embed`` / ``convert`` / ``info`` through the CLI entry point."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertkit.cli.main import main

tokenizer_module = pytest.importorskip("bertkit.tokenizer")


@pytest.fixture
def model_dir(make_mlm_dir):
    return make_mlm_dir(16)


def test_fill_mask_prints_top_k(model_dir, capsys):
    assert main(["fill-mask", str(model_dir), "the man went to the [MASK] .", "--top-k", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "the man went to the [MASK] ."
    assert [line.strip()[:2] for line in out[2:6]] == ["1.", "2.", "3.", "4."]
    assert main(["fill-mask", str(model_dir), "[MASK] went to the [MASK]", "--json", "--top-k", "2"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert len(record["masks"]) == 2 and len(record["masks"][0]) == 2


def test_embed_writes_npy_and_jsonl(model_dir, tmp_path, capsys):
    tsv = tmp_path / "in.tsv"
    tsv.write_text("sentence\tsecond\tlabel\nthe man went\the is good\t1\nshe was bad\ta day\t0\n")
    out = tmp_path / "f.npy"
    code = main(["embed", str(model_dir), "--input", str(tsv), "--text-column", "sentence",
                 "--pair-column", "second", "--layers", "-1,-2,-3", "--output", str(out)])
    assert code == 0
    assert np.load(out).shape == (2, 48)
    jsonl = tmp_path / "f.jsonl"
    plain = tmp_path / "in.txt"
    plain.write_text("the man went\nhe is good\n")
    code = main(["embed", str(model_dir), "--input", str(plain), "--pool", "none", "--output", str(jsonl)])
    assert code == 0
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert records[0]["tokens"] == ["[CLS]", "the", "man", "went", "[SEP]"]
    assert np.asarray(records[1]["features"]).shape == (5, 16)


def test_embed_sparse_writes_each_inputs_splade_terms(model_dir, tmp_path, capsys):
    from bertkit.inference import load

    plain = tmp_path / "in.txt"
    plain.write_text("the man went\nhe is good\n")
    out = tmp_path / "s.jsonl"
    assert main(["embed", str(model_dir), "--input", str(plain), "--sparse", "--output", str(out)]) == 0
    assert "inputs' sparse vectors" in capsys.readouterr().err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    bert = load(model_dir)
    want = bert.embed_sparse(["the man went", "he is good"])
    assert [r["text"] for r in records] == ["the man went", "he is good"]
    for record, terms in zip(records, want):
        assert [t["index"] for t in record["sparse"]] == [t["index"] for t in terms]
        np.testing.assert_allclose([t["value"] for t in record["sparse"]], [t["value"] for t in terms], atol=1e-6)
        assert [t["token"] for t in record["sparse"]] == bert.tokenizer.convert_ids_to_tokens(
            [t["index"] for t in terms])


@pytest.mark.parametrize("flags, message", [
    (["--output", "s.npy"], "a .jsonl file, not s.npy"),
    (["--output", "s.jsonl", "--pool", "mean"], "--pool cannot apply"),
    (["--output", "s.jsonl", "--layers", "-1,-2", "--combine", "sum"], "--layers, --combine cannot apply"),
    (["--output", "s.jsonl", "--long-text", "window"], "--long-text window cannot apply"),
])
def test_embed_sparse_refuses_what_it_cannot_honour(model_dir, tmp_path, capsys, flags, message):
    plain = tmp_path / "in.txt"
    plain.write_text("the man went\n")
    flags = [str(tmp_path / f) if f.startswith("s.") else f for f in flags]
    assert main(["embed", str(model_dir), "--input", str(plain), "--sparse", *flags]) == 1
    err = capsys.readouterr().err
    assert message in err.replace(str(tmp_path) + "/", "") and "Traceback" not in err


def test_errors_are_reported_cleanly(model_dir, tmp_path, capsys):
    plain = tmp_path / "in.txt"
    plain.write_text(" ".join(["good"] * 30) + "\n")
    code = main(["embed", str(model_dir), "--input", str(plain), "--on-overflow", "error",
                 "--output", str(tmp_path / "x.npy")])
    assert code == 1 and "32 tokens, more than the limit of 16" in capsys.readouterr().err
    assert main(["fill-mask", str(tmp_path), "[MASK]"]) == 1
    assert "not a BERT model directory" in capsys.readouterr().err
    assert main(["embed", str(model_dir), "--input", str(plain), "--pool", "none",
                 "--output", str(tmp_path / "x.npy")]) == 1
    assert ".jsonl" in capsys.readouterr().err


def test_convert_and_info(model_dir, tmp_path, capsys):
    assert main(["convert", str(model_dir), str(tmp_path / "copy")]) == 0
    assert (tmp_path / "copy" / "vocab.txt").exists()
    assert main(["info", str(tmp_path / "copy")]) == 0
    assert "2 layers, hidden 16" in capsys.readouterr().out
    assert main(["info", "base"]) == 0
    assert "109,482,240 (109.5M; the paper reports 110M)" in capsys.readouterr().out
    assert main(["info", "large"]) == 0
    assert "335,141,888 (335.1M; the paper reports 340M)" in capsys.readouterr().out
