"""Pre-training data is what the paper says, checked over thousands of generated instances.

The synthetic corpus encodes every sentence's document and position in its tokens: sentence
``s`` of document ``d`` is made of the word ``d{d}s{s}`` (a vocabulary entry), some of them
written ``d{d}s{s}xx`` so that WordPiece splits them into ``d{d}s{s} ##x ##x`` (whole words
of several pieces). From the unmasked ids of an instance the test can therefore tell which
sentences of which documents segments A and B hold.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from bertkit.pretraining.data import (
    CreationSettings,
    PretrainingDataset,
    collate,
    create_pretraining_data,
)

DOCS, MAX_SENTENCES, T = 80, 16, 48
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
PAD, CLS, SEP, MASK = 0, 2, 3, 4


def make_corpus(directory: Path, docs: int = DOCS, seed: int = 0) -> tuple[Path, Path, dict]:
    """Write vocab.txt and corpus.txt; return them and ``{(d, s): number of tokens}``.

    Document 0 has a single sentence; the others 2..MAX_SENTENCES.
    """
    rng = random.Random(seed)
    words = [f"d{d}s{s}" for d in range(docs) for s in range(MAX_SENTENCES)]
    (directory / "vocab.txt").write_text("\n".join(SPECIALS + ["##x"] + words) + "\n")
    lengths, lines = {}, []
    for d in range(docs):
        for s in range(1 if d == 0 else rng.randint(2, MAX_SENTENCES)):
            pieces = [rng.random() < 0.3 for _ in range(rng.randint(1, 9))]
            lines.append(" ".join(f"d{d}s{s}" + ("xx" if p else "") for p in pieces))
            lengths[(d, s)] = sum(3 if p else 1 for p in pieces)
        lines.append("")
    (directory / "corpus.txt").write_text("\n".join(lines) + "\n")
    return directory / "vocab.txt", directory / "corpus.txt", lengths


def sentence_of(vocab: list[str]):
    """Map an id to ``(document, sentence)``, or None for ``##x`` and special tokens."""
    table = {}
    for i, token in enumerate(vocab):
        if token.startswith("d"):
            d, s = token[1:].split("s")
            table[i] = (int(d), int(s))
    return table.get


def runs(ids, decode) -> list[tuple[int, int]]:
    """The distinct sentences a segment's ids come from, in order."""
    out = []
    for i in ids:
        key = decode(int(i))
        if key is not None and (not out or out[-1] != key):
            out.append(key)
    return out


def build(tmp_path: Path, name: str, **kwargs) -> Path:
    options = {"workers": kwargs.pop("workers", 1), "shard_size": kwargs.pop("shard_size", 1000)}
    settings = CreationSettings(max_seq_length=T, max_predictions_per_seq=8, chunk_sentences=300, **kwargs)
    create_pretraining_data([tmp_path / "corpus.txt"], tmp_path / "vocab.txt", tmp_path / name,
                            settings, progress=False, **options)
    return tmp_path / name


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretraining-data")
    vocab_path, _, lengths = make_corpus(root)
    vocab = vocab_path.read_text().split("\n")[:-1]
    static = build(root, "static", dupe_factor=20, seed=1)
    return {"root": root, "vocab": vocab, "lengths": lengths, "decode": sentence_of(vocab),
            "static": static, "masked": PretrainingDataset(static),
            "plain": PretrainingDataset(static, unmasked=True)}


def test_instances_are_packed_runs_of_whole_sentences(corpus):
    plain, decode, lengths = corpus["plain"], corpus["decode"], corpus["lengths"]
    assert len(plain) > 3000
    is_next = 0
    one_sentence_document_as_b = 0
    for i in range(len(plain)):
        item = plain[i]
        ids, types = item["input_ids"], item["token_type_ids"]
        n = int(item["attention_mask"].sum())
        b = int(np.argmax(types))
        assert 5 <= n <= T and item["attention_mask"][:n].all() and (ids[n:] == PAD).all()
        assert ids[0] == CLS and ids[b - 1] == SEP and ids[n - 1] == SEP
        assert (types[:b] == 0).all() and (types[b:n] == 1).all() and (types[n:] == 0).all()
        assert not np.isin(ids[1 : b - 1], [CLS, SEP, PAD, MASK]).any()
        assert not np.isin(ids[b : n - 1], [CLS, SEP, PAD, MASK]).any()
        a, bb = runs(ids[1 : b - 1], decode), runs(ids[b : n - 1], decode)
        for segment in (a, bb):  # a run of consecutive sentences of one document
            assert len({d for d, _ in segment}) == 1
            assert [s for _, s in segment] == list(range(segment[0][1], segment[-1][1] + 1))
        truncated = n == T
        if not truncated:  # every sentence whole
            assert sum(lengths[key] for key in a + bb) == n - 3
        if item["next_sentence_label"] == 0:
            is_next += 1
            assert a[-1][0] == bb[0][0], "IsNext B must continue A's document"
            if truncated:
                assert bb[0][1] > a[-1][1]
            else:
                assert bb[0][1] == a[-1][1] + 1, "IsNext B must be the next sentence"
        else:
            assert item["next_sentence_label"] == 1
            assert a[-1][0] != bb[0][0], "NotNext B must come from another document"
            one_sentence_document_as_b += bb[0][0] == 0
    assert is_next / len(plain) == pytest.approx(0.5, abs=0.03)
    assert one_sentence_document_as_b > 0


def test_masking_statistics(corpus):
    masked, plain = corpus["masked"], corpus["plain"]
    special = [PAD, 1, CLS, SEP, MASK]
    predicted = candidates = as_mask = kept = randomized = 0
    for i in range(len(masked)):
        m, p = masked[i], plain[i]
        labels = m["mlm_labels"]
        where = labels != -100
        assert where.sum() <= 8
        assert (labels[where] == p["input_ids"][where]).all()
        assert not np.isin(p["input_ids"][where], special).any(), "a special token was masked"
        assert (m["input_ids"][~where] == p["input_ids"][~where]).all()
        assert not np.isin(m["input_ids"][where], [PAD, 1, CLS, SEP, 5]).any()
        predicted += where.sum()
        candidates += (~np.isin(p["input_ids"], special)).sum()
        as_mask += (m["input_ids"][where] == MASK).sum()
        kept += (m["input_ids"][where] == labels[where]).sum()
        randomized += ((m["input_ids"][where] != MASK) & (m["input_ids"][where] != labels[where])).sum()
    assert predicted / candidates == pytest.approx(0.15, abs=0.01)
    assert as_mask / predicted == pytest.approx(0.8, abs=0.02)
    assert kept / predicted == pytest.approx(0.1, abs=0.015)
    assert randomized / predicted == pytest.approx(0.1, abs=0.015)
    summary = masked.meta["summary"]
    assert summary["masked_share"] == pytest.approx(predicted / candidates)
    assert summary["instances"] == len(masked)


def test_whole_word_masking_masks_words_whole(corpus, tmp_path):
    root = corpus["root"]
    wwm = PretrainingDataset(build(root, "wwm", dupe_factor=2, seed=3, whole_word_mask=True))
    piece = corpus["vocab"].index("##x")
    predicted = candidates = 0
    plain = PretrainingDataset(wwm.directory, unmasked=True)
    for i in range(len(wwm)):
        item = wwm[i]
        where = item["mlm_labels"] != -100
        original = np.where(where, item["mlm_labels"], item["input_ids"])
        assert (original == plain[i]["input_ids"]).all()
        n = int(item["attention_mask"].sum())
        word = np.cumsum(original[:n] != piece)  # pieces share their word's number
        for w in np.unique(word[where[:n]]):
            inside = (word == w) & (original[:n] != SEP) & (original[:n] != CLS)
            assert where[:n][inside].all(), "a word was masked in part"
        predicted += where.sum()
        candidates += n - 3
    assert predicted / candidates == pytest.approx(0.15, abs=0.02)


def test_same_seed_same_bytes_whatever_the_workers(corpus):
    root = corpus["root"]
    one = build(root, "w1", dupe_factor=2, seed=7, workers=1, shard_size=300)
    two = build(root, "w2", dupe_factor=2, seed=7, workers=2, shard_size=300)
    other = build(root, "w3", dupe_factor=2, seed=8, workers=1, shard_size=300)
    names = sorted(p.name for p in one.iterdir())
    assert names == sorted(p.name for p in two.iterdir())
    assert sum(n.endswith(".input_ids.npy") for n in names) > 1, "several shards expected"
    for name in names:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    assert (one / "shard-00000.input_ids.npy").read_bytes() != (other / "shard-00000.input_ids.npy").read_bytes()
    assert not [p for p in one.iterdir() if p.name.startswith(".")], "temporary files left"


def test_dynamic_masking_is_a_function_of_seed_epoch_index(corpus):
    root = corpus["root"]
    directory = build(root, "dynamic", dupe_factor=1, seed=1, dynamic_masking=True)
    stored = np.load(directory / "shard-00000.input_ids.npy", mmap_mode="r")
    assert not (stored == MASK).any(), "dynamic data stores unmasked tokens"
    a = PretrainingDataset(directory, seed=5)
    b = PretrainingDataset(directory, dynamic_masking=True, seed=5)
    assert a.dynamic_masking and len(a) > 100
    for i in (0, 17, len(a) - 1):
        for key in a[i]:
            assert (a[i][key] == b[i][key]).all()
        assert (a[i]["mlm_labels"] != -100).any()
    before = [a[i]["mlm_labels"].copy() for i in range(50)]
    a.set_epoch(1)
    after = [a[i]["mlm_labels"] for i in range(50)]
    assert any((x != y).any() for x, y in zip(before, after))
    b.set_epoch(1)
    part = pickle.loads(pickle.dumps(b.shard(1, 3)))  # as a DataLoader worker would get it
    assert len(part) == len(a) // 3
    assert (part[0]["input_ids"] == a[len(a) // 3]["input_ids"]).all()
    c = PretrainingDataset(directory, seed=6)
    c.set_epoch(1)
    assert any((c[i]["mlm_labels"] != x).any() for i, x in enumerate(after))
    share = np.mean([(a[i]["mlm_labels"] != -100).sum() / (a[i]["attention_mask"].sum() - 3) for i in range(len(a))])
    assert share == pytest.approx(0.15, abs=0.02)


def test_static_data_can_be_masked_dynamically(corpus):
    dynamic = PretrainingDataset(corpus["static"], dynamic_masking=True, seed=0)
    item, plain = dynamic[3], corpus["plain"][3]
    where = item["mlm_labels"] != -100
    assert (item["mlm_labels"][where] == plain["input_ids"][where]).all()


def test_shards_and_collate(corpus):
    data = corpus["masked"]
    parts = [data.shard(r, 4) for r in range(4)]
    assert len({len(p) for p in parts}) == 1 and sum(map(len, parts)) > len(data) - 4
    assert [p.global_index(0) for p in parts] == [r * len(parts[0]) for r in range(4)]
    with pytest.raises(IndexError):
        parts[0][len(parts[0])]
    batch = collate([data[i] for i in range(5)])
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "mlm_labels", "next_sentence_label"}
    assert batch["input_ids"].shape == (5, T) and batch["next_sentence_label"].shape == (5,)
    assert all(str(t.dtype) == "torch.int64" for t in batch.values())
    item = data[0]
    assert item["input_ids"].dtype == np.int32 and item["mlm_labels"].dtype == np.int64
    meta = data.meta
    assert meta["vocab_size"] == len(corpus["vocab"]) and len(meta["vocab_sha256"]) == 64
    assert meta["input_ids_dtype"] == "uint16" and meta["max_seq_length"] == T


def _die_on_second_chunk(chunk, job):
    """A worker that is killed outright (as the OOM killer would) on chunk 1."""
    import os
    import signal

    from bertkit.pretraining import create

    if chunk.index == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return create._ORIGINAL_PROCESS_CHUNK(chunk, job)


def test_a_killed_worker_stops_the_run_with_a_clear_error(corpus, monkeypatch):
    from bertkit.errors import BertkitError
    from bertkit.pretraining import create

    monkeypatch.setattr(create, "_ORIGINAL_PROCESS_CHUNK", create.process_chunk, raising=False)
    monkeypatch.setattr(create, "process_chunk", _die_on_second_chunk)
    with pytest.raises(BertkitError, match="worker process died"):
        build(corpus["root"], "killed", dupe_factor=2, seed=7, workers=2, shard_size=300)
    assert not (corpus["root"] / "killed" / "meta.json").exists()


def _children(pid: int) -> set[int]:
    """The child processes of ``pid`` (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


SLOW_WORKERS = """
import sys, time
from pathlib import Path
from bertkit.pretraining import create
from bertkit.pretraining.data import CreationSettings, create_pretraining_data

def slow_chunk(chunk, job):
    time.sleep(600)  # a worker busy for ever: only its parent's death can end it

create.process_chunk = slow_chunk
root = Path(sys.argv[1])
create_pretraining_data([root / "corpus.txt"], root / "vocab.txt", root / "out",
                        CreationSettings(max_seq_length=48, max_predictions_per_seq=8,
                                         chunk_sentences=50), workers=2, progress=False)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads Linux's /proc")
def test_no_worker_outlives_its_parent_killed_with_sigkill(corpus):
    import os
    import signal
    import subprocess
    import sys
    import time

    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    parent = subprocess.Popen([sys.executable, "-c", SLOW_WORKERS, str(corpus["root"])], env=env)
    workers: set[int] = set()
    try:
        for _ in range(1200):  # wait (up to minutes on a loaded machine) for both workers
            workers = _children(parent.pid)
            if len(workers) >= 2 or parent.poll() is not None:
                break
            time.sleep(0.1)
        assert len(workers) >= 2, "the workers did not start"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        for _ in range(600):
            if not any(_alive(pid) for pid in workers):
                break
            time.sleep(0.1)
        left = [pid for pid in workers if _alive(pid)]
        assert not left, f"worker(s) {left} outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in workers:  # this test's own workers, should one have outlived the parent
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
