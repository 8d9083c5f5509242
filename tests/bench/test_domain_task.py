"""bench/domain_task.py: labels by part openings, held-out documents, splits by document."""

from __future__ import annotations

import json

import pytest

PARTS = (("alpha", "Alpha opens here."), (None, "Skip opens here."), ("beta", "Beta opens here."))


def corpus(path, docs):
    path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    return path


def test_part_labels_follow_openings(bench_module):
    dt = bench_module("domain_task")
    docs = [["Before any part."], ["Alpha opens here."], ["More alpha."], ["Skip opens here."],
            ["Beta opens here."], ["More beta."]]
    assert dt.part_labels(docs, PARTS) == [None, "alpha", "alpha", None, "beta", "beta"]


@pytest.mark.parametrize("docs, message", [
    ([["Alpha opens here."], ["Beta opens here."]], "begins 0 documents"),
    ([["Alpha opens here."], ["Skip opens here."], ["Alpha opens here."], ["Beta opens here."]],
     "begins 2 documents"),
    ([["Skip opens here."], ["Alpha opens here."], ["Beta opens here."]], "before the previous"),
])
def test_part_labels_refuse_a_corpus_they_do_not_fit(bench_module, docs, message):
    dt = bench_module("domain_task")
    with pytest.raises(dt.TaskError, match=message):
        dt.part_labels(docs, PARTS)


def test_split_documents_holds_out_every_nth_and_splits_per_label(bench_module):
    dt = bench_module("domain_task")
    labels = ["a"] * 50 + [None] * 5 + ["b"] * 25
    held, split = dt.split_documents(labels, every=5)
    assert [i for i, h in enumerate(held) if h] == list(range(4, 80, 5))
    assert all(s is None for s, h in zip(split, held) if not h)
    a = [s for s, label, h in zip(split, labels, held) if h and label == "a"]
    assert a == ["train", "train", "train", "dev", "test"] * 2  # per label, in corpus order
    b = [s for s, label, h in zip(split, labels, held) if h and label == "b"]
    assert b == ["train", "train", "train", "dev", "test"]


def test_build_keeps_task_documents_out_of_the_pretraining_text(bench_module, tmp_path):
    dt = bench_module("domain_task")
    docs = [["Alpha opens here."]] + [[f"alpha document {i} says something long enough here."]
                                      for i in range(1, 20)]
    docs += [["Skip opens here."], ["Beta opens here."]]
    docs += [[f"beta document {i} says something long enough here.", "Short one."] for i in range(1, 20)]
    path = corpus(tmp_path / "c.txt", docs)
    stats = dt.build(path, tmp_path / "out", every=2, min_words=4, cap=3, eval_cap=100, seed=1,
                     parts=PARTS)
    pretrain = (tmp_path / "out" / "pretrain.txt").read_text(encoding="utf-8")
    heldout = (tmp_path / "out" / "heldout.txt").read_text(encoding="utf-8")
    rows = {s: [json.loads(x) for x in (tmp_path / "out" / "task" / f"{s}.jsonl").open()]
            for s in ("train", "dev", "test")}
    texts = [r["text"] for split in rows.values() for r in split]
    assert texts and all(t not in pretrain and t in heldout for t in texts)
    assert all("Short one." != t for t in texts)  # under min_words
    assert {r["label"] for r in rows["train"]} == {"alpha", "beta"}
    assert max(sum(r["label"] == lab for r in rows["train"]) for lab in ("alpha", "beta")) == 3
    assert stats["pretrain_documents"] + stats["held_out_documents"] == len(docs)
    assert pretrain.count("\n\n") == stats["pretrain_documents"]


def test_main_reports_a_corpus_it_cannot_label(bench_module, tmp_path, capsys):
    dt = bench_module("domain_task")
    path = corpus(tmp_path / "c.txt", [["Not the python docs."]])
    assert dt.main(["--corpus", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "opening sentence" in capsys.readouterr().err


def test_the_shared_python_docs_fit_the_parts(bench_module, shared, tmp_path):
    dt = bench_module("domain_task")
    stats = dt.build(shared("corpus", "python-docs.txt"), tmp_path)
    assert stats["labels"] == ["c-api", "extending", "faq", "howto", "library", "reference",
                               "tutorial", "using", "whatsnew"]
    assert all(stats["sentences"][s].keys() == set(stats["labels"]) for s in ("train", "dev", "test"))
    pretrain = set((tmp_path / "pretrain.txt").read_text(encoding="utf-8").splitlines())
    for split in ("train", "dev", "test"):
        for line in (tmp_path / "task" / f"{split}.jsonl").open(encoding="utf-8"):
            assert json.loads(line)["text"] not in pretrain


def test_sentences_repeated_in_the_pretraining_text_or_in_train_are_left_out(bench_module):
    dt = bench_module("domain_task")
    docs = [["one two three four"], ["five six seven eight", "one two three four"],
            ["nine ten eleven twelve", "five six seven eight"]]
    rows = dt.task_rows(docs, ["a", "a", "a"], [None, "train", "dev"], 4,
                        {"train": 9, "dev": 9, "test": 9}, 1, exclude={"one two three four"})
    assert [r["text"] for r in rows["train"]] == ["five six seven eight"]
    assert [r["text"] for r in rows["dev"]] == ["nine ten eleven twelve"]
