"""Units of pre-training data creation, bad input, atomic output, the CLI and the real corpus."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from bertkit.cli.main import main
from bertkit.errors import DataFormatError
from bertkit.pretraining import create as create_module
from bertkit.pretraining.data import (
    CreationSettings,
    MaskingConfig,
    PretrainingDataset,
    VocabInfo,
    create_pretraining_data,
    iter_documents,
    mask_sequence,
    split_into_sentences,
)
from bertkit.pretraining.documents import iter_chunks
from bertkit.pretraining.instances import instances_from_document, truncate_pair
from tests.conftest import TINY_VOCAB

TEXT = ["the man went to the store .", "he was good !", "she is quick ?", "a bad night ."]


def write(path, documents):
    path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    return path


def test_split_into_sentences():
    text = 'Mr. Smith went to Washington. He said "Hi!" Then J. R. R. Tolkien wrote, e.g. this. 3 cats? Yes...'
    assert split_into_sentences(text) == [
        "Mr. Smith went to Washington.", 'He said "Hi!"', "Then J. R. R. Tolkien wrote, e.g. this.",
        "3 cats?", "Yes...",
    ]
    assert split_into_sentences("version 2.5 is out. ok") == ["version 2.5 is out. ok"]


def test_documents_and_chunks(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("\n\nOne. Two!\n\n\nThree? Four.\nFive\n", encoding="utf-8")
    assert list(iter_documents([path])) == [["One. Two!"], ["Three? Four.", "Five"]]
    assert list(iter_documents([path, path], split_sentences=True)) == [
        ["One.", "Two!"], ["Three?", "Four.", "Five"]] * 2
    documents = [["s"] * n for n in (3, 1, 4, 1, 5, 1)]
    chunks = list(iter_chunks(documents, chunk_sentences=4))
    assert [c.index for c in chunks] == [0, 1, 2]
    assert [len(c.documents) for c in chunks] == [2, 2, 2]
    assert [len(c.documents) for c in iter_chunks(documents[:5], 4)] == [2, 3]  # tail merged
    assert sum(len(c.documents) for c in iter_chunks(documents, 1000)) == 6


def test_shuffled_documents_cover_every_document_once(tmp_path):
    a = write(tmp_path / "a.txt", [[f"a{i} one.", f"a{i} two."] for i in range(30)])
    b = write(tmp_path / "b.txt", [[f"b{i} one. b{i} two."] for i in range(30)])
    ordered = list(iter_documents([a, b], split_sentences=True))
    shuffled = list(iter_documents([a, b], split_sentences=True, shuffle_seed=7))
    assert shuffled != ordered and sorted(shuffled) == sorted(ordered)
    assert shuffled == list(iter_documents([a, b], split_sentences=True, shuffle_seed=7))
    assert shuffled != list(iter_documents([a, b], split_sentences=True, shuffle_seed=8))
    # the two files are interleaved, not read one after the other
    sources = [d[0][0] for d in shuffled]
    assert sum(x != y for x, y in zip(sources, sources[1:])) > 10


def test_shuffled_documents_name_file_and_line_of_bad_bytes(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"one .\n\ntwo .\nthe \xff store\n\nthree .\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt:4"):
        list(iter_documents([path], shuffle_seed=0))


def test_notnext_segments_come_from_the_whole_corpus(tmp_path, tiny_vocab_file):
    # file a speaks of "man", file b of "quick"; unshuffled, each file is its own chunk
    first = write(tmp_path / "a.txt", [["the man went to the store .", "he was good ."]] * 40)
    second = write(tmp_path / "b.txt", [["she is quick ?", "a bad night ."]] * 40)
    man, quick = TINY_VOCAB.index("man"), TINY_VOCAB.index("quick")
    crossing = {}
    for shuffle in (False, True):
        settings = CreationSettings(dupe_factor=2, max_seq_length=32, chunk_sentences=80,
                                    shuffle_documents=shuffle)
        out = tmp_path / f"out-{shuffle}"
        meta = create_pretraining_data([first, second], tiny_vocab_file, out, settings, progress=False)
        assert meta["settings"]["shuffle_documents"] is shuffle
        data = PretrainingDataset(out, unmasked=True)
        crossing[shuffle] = 0
        for i in range(len(data)):
            item = data[i]
            ids, segment = item["input_ids"], item["token_type_ids"]
            a, b = set(ids[segment == 0].tolist()), set(ids[segment == 1].tolist())
            crossing[shuffle] += (man in a and quick in b) or (quick in a and man in b)
            if item["next_sentence_label"] == 0:  # IsNext never crosses documents
                assert not ((man in a and quick in b) or (quick in a and man in b))
    assert crossing[False] == 0 and crossing[True] > 10


def test_short_seq_prob_and_truncation():
    documents = [[[7]] * 200 for _ in range(2000)]  # one-token sentences: lengths show the target
    rng = random.Random(0)
    firsts = [instances_from_document(documents, i, 48, 0.1, rng)[0] for i in range(len(documents))]
    # IsNext pairs of one-token sentences hold exactly the target (NotNext B may run out).
    short = np.mean([len(x.tokens_a) + len(x.tokens_b) < 45 for x in firsts if not x.is_random_next])
    assert short == pytest.approx(0.1 * 43 / 44, abs=0.02)
    for la, lb, limit in np.ndindex(20, 20, 25):  # lengths as the original one-token loop
        a, b = la, lb
        while a + b > limit + 2:
            a, b = (a - 1, b) if a > b else (a, b - 1)
        x, y = list(range(la)), list(range(lb))
        truncate_pair(x, y, limit + 2, rng)
        assert (len(x), len(y)) == (a, b)
    a, b = list(range(10)), list(range(100, 130))
    truncate_pair(a, b, 20, random.Random(1))
    assert len(a) + len(b) == 20 and len(a) == 10 and len(b) == 10
    assert b[0] > 100 and b[-1] < 129  # cut from both ends at random


def test_masking_unit():
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused1]", "a", "b", "##c"]
    info = VocabInfo.from_tokens(tokens)
    assert info.random_pool.tolist() == [6, 7, 8] and info.mask_id == 4
    ids = np.array([2, 6, 7, 8, 8, 6, 1, 3, 7, 8, 3, 0, 0])
    config = MaskingConfig(0.5, 3, whole_word_mask=True)
    for seed in range(200):
        masked, positions, labels = mask_sequence(ids, info, config, np.random.default_rng(seed))
        assert (labels == ids[positions]).all() and len(positions) <= 3
        assert not set(positions.tolist()) & {0, 6, 7, 10, 11, 12}
        words = [{1}, {2, 3, 4}, {5}, {8, 9}]
        chosen = set(positions.tolist())
        assert all(w <= chosen or not w & chosen for w in words)
    with pytest.raises(ValueError):
        MaskingConfig(masked_lm_prob=0.0)


def test_empty_corpus_is_a_clear_error(tmp_path, tiny_vocab_file):
    path = tmp_path / "empty.txt"
    path.write_text("\n\n  \n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no text"):
        create_pretraining_data([path], tiny_vocab_file, tmp_path / "out", progress=False)
    one = write(tmp_path / "one.txt", [TEXT])
    with pytest.raises(DataFormatError, match="at least two"):
        create_pretraining_data([one], tiny_vocab_file, tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "meta.json").exists()


def test_undecodable_bytes_name_file_and_line(tmp_path, tiny_vocab_file):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"the man .\n\nhe was good .\nthe \xff store\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt:4"):
        create_pretraining_data([path], tiny_vocab_file, tmp_path / "out", progress=False)


def test_one_sentence_documents_serve_as_random_b(tmp_path, tiny_vocab_file):
    path = write(tmp_path / "c.txt", [[TEXT[0]], TEXT[1:], [TEXT[0]]])
    meta = create_pretraining_data([path], tiny_vocab_file, tmp_path / "out",
                                   CreationSettings(dupe_factor=50, max_seq_length=16), progress=False)
    assert meta["summary"]["documents"] == 3 and meta["summary"]["instances"] > 100
    data = PretrainingDataset(tmp_path / "out", unmasked=True)
    labels = [int(data[i]["next_sentence_label"]) for i in range(len(data))]
    assert 0 in labels and 1 in labels


def test_a_crash_midway_leaves_no_finished_looking_output(tmp_path, tiny_vocab_file, monkeypatch):
    path = write(tmp_path / "c.txt", [TEXT, TEXT[::-1]] * 30)
    out = tmp_path / "out"
    settings = CreationSettings(dupe_factor=2, max_seq_length=16, chunk_sentences=20)
    create_pretraining_data([path], tiny_vocab_file, out, settings, shard_size=40, progress=False)
    first = sorted(p.name for p in out.iterdir())
    real = create_module.process_chunk
    calls = []

    def crashing(chunk, job):
        calls.append(chunk.index)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(chunk, job)

    monkeypatch.setattr(create_module, "process_chunk", crashing)
    with pytest.raises(KeyboardInterrupt):
        create_pretraining_data([path], tiny_vocab_file, out, settings, shard_size=40, progress=False)
    assert not (out / "meta.json").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "temporary files left"
    with pytest.raises(DataFormatError, match="did not finish"):
        PretrainingDataset(out)
    monkeypatch.setattr(create_module, "process_chunk", real)
    create_pretraining_data([path], tiny_vocab_file, out, settings, shard_size=40, progress=False)
    assert sorted(p.name for p in out.iterdir()) == first


def test_cli(tmp_path, tiny_vocab_file, capsys):
    path = write(tmp_path / "c.txt", [TEXT, TEXT[1:]])
    out = tmp_path / "out"
    code = main(["pretrain-data", "--input", str(path), "--vocab", str(tiny_vocab_file), "--output",
                 str(out), "--max-seq-length", "16", "--max-predictions-per-seq", "3",
                 "--dupe-factor", "3", "--dynamic-masking", "--whole-word-mask", "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "IsNext share" in printed and "drawn at load time" in printed
    meta = json.loads((out / "meta.json").read_text())
    assert meta["masking"] == "dynamic" and meta["whole_word_mask"] and meta["settings"]["dupe_factor"] == 3
    with pytest.raises(SystemExit) as exit_info:  # refused while parsing, before any work
        main(["pretrain-data", "--input", str(path), "--vocab", str(tiny_vocab_file),
              "--output", str(out), "--masked-lm-prob", "2", "--quiet"])
    assert exit_info.value.code == 2
    assert "argument --masked-lm-prob: must be in (0, 1) (got 2)" in capsys.readouterr().err


def test_kjv_slice_smoke(tmp_path, shared):
    corpus, vocab = shared("corpus", "kjv.txt"), shared("vocab", "bert-base-uncased-vocab.txt")
    lines = corpus.read_text(encoding="utf-8").splitlines()[:2500]
    path = tmp_path / "kjv-slice.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta = create_pretraining_data([path], vocab, tmp_path / "out", CreationSettings(dupe_factor=1),
                                   progress=False)
    s = meta["summary"]
    assert s["documents"] > 50 and s["instances"] > 500
    assert s["masked_share"] == pytest.approx(0.15, abs=0.01)
    assert s["is_next_share"] == pytest.approx(0.5, abs=0.05)
    assert meta["vocab_size"] == 30522 and meta["input_ids_dtype"] == "uint16"
    item = PretrainingDataset(tmp_path / "out")[0]
    assert item["input_ids"][0] == 101 and (item["mlm_labels"] != -100).sum() <= 20


def test_every_cli_option_has_help():
    from bertkit.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["pretrain-data"]
    options = [a for a in sub._actions if a.option_strings and a.dest != "help"]
    assert len(options) >= 17
    assert all(a.help and len(a.help) > 10 for a in options)
