"""Every data reader on arbitrary bytes and on mutated files (hypothesis).

A reader either returns or raises a :class:`bertkit.errors.BertkitError` naming the file
(and, when it gives a line, a line of the file); never any other exception. The files
mutated are tiny well-formed ones made here (always) and slices of the real data in
../shared/data (when present). Examples per test: the ``ci`` profile of tests/conftest.py
(60, derandomized) unless ``HYPOTHESIS_PROFILE=long`` (1000, random).
"""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bertkit.cli.main import build_parser
from bertkit.errors import BertkitError, DataFormatError
from bertkit.pretraining.documents import iter_chunks, iter_documents
from bertkit.tasks.formats import (
    read_conll,
    read_glue,
    read_squad,
    read_swag,
    read_text_classification,
    read_token_classification,
)
from tests.conftest import SHARED_DATA

SQUAD_TINY = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
    "context": "The cat sat.", "qas": [
        {"id": "q1", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "q2", "question": "Why?", "answers": [], "is_impossible": True}]}]}]}

# name -> (reader, file suffix, tiny well-formed content, real file and line count or None)
READERS = {
    "glue-sst2": (lambda p: read_glue("sst2", p), ".tsv",
                  "sentence\tlabel\na fine film\t1\nawful\t0\n", ("glue/SST-2/dev.tsv", 40)),
    "glue-cola": (lambda p: read_glue("cola", p), ".tsv",
                  "gj04\t1\t\tThe cat sat.\ngj04\t0\t*\tCat the sat.\n", ("glue/CoLA/dev.tsv", 40)),
    "glue-stsb": (lambda p: read_glue("stsb", p), ".tsv",
                  "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
                  "\tscore\n0\tm\tf\t2012\t1\tn\tn\tA man.\tA man!\t5.000\n",
                  ("glue/STS-B/dev.tsv", 40)),
    "glue-mrpc": (lambda p: read_glue("mrpc", p), ".txt",
                  "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA b.\tA c.\n",
                  ("glue/MRPC/msr_paraphrase_test.txt", 40)),
    "glue-rte": (lambda p: read_glue("rte", p), ".tsv",
                 "index\tsentence1\tsentence2\tlabel\n0\tA b.\tA.\tentailment\n",
                 ("glue/RTE/dev.tsv", 20)),
    "conll": (read_conll, ".txt", "EU NNP B-ORG\nrejects VBZ O\n\nPeter NNP B-PER\n",
              ("conll2003/dev.txt", 60)),
    "squad": (read_squad, ".json", json.dumps(SQUAD_TINY, indent=1), None),
    "generic-csv": (lambda p: read_text_classification(p, labels=["pos", "neg"]), ".csv",
                    'text,label\n"a, b",pos\nc,neg\n', None),
    "generic-tsv": (lambda p: read_text_classification(p, "a", "b", regression=True), ".tsv",
                    "a\tb\tlabel\nx\ty\t0.5\n", None),
    "generic-jsonl": (lambda p: read_text_classification(p, id_column="id"), ".jsonl",
                      '{"id": 1, "text": "a", "label": 1}\n{"id": 2, "text": "b", "label": "x"}\n',
                      None),
    "tokens-jsonl": (lambda p: read_token_classification(p, bio=True), ".jsonl",
                     '{"tokens": ["EU", "x"], "tags": ["B-ORG", "O"]}\n', None),
    "swag": (read_swag, ".csv", ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
             "ending0,ending1,ending2,ending3,label\n0,v,1,s,A,B,gold,a,b,c,d,2\n", None),
    "corpus": (lambda p: list(iter_chunks(iter_documents([p]), 3)), ".txt",
               "One sentence.\nTwo.\n\nNext document.\n", ("corpus/kjv.txt", 60)),
    "corpus-split": (lambda p: list(iter_documents([p], split_sentences=True)), ".txt",
                     "Mr. Smith went. He came back! Did he?\n\nA new one.\n",
                     ("corpus/python-docs.txt", 60)),
}


@functools.cache
def _real_bytes(name: str) -> bytes | None:
    """A slice of the real file (its first lines; SQuAD: one article, re-indented)."""
    if name == "squad":
        path = SHARED_DATA / "squad" / "dev-v2.0.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        small = {"version": data["version"], "data": [{"title": data["data"][0]["title"],
                                                      "paragraphs": data["data"][0]["paragraphs"][:2]}]}
        return json.dumps(small, indent=1, ensure_ascii=False).encode("utf-8")
    spec = READERS[name][3]
    if spec is None or not (SHARED_DATA / spec[0]).exists():
        return None
    with open(SHARED_DATA / spec[0], "rb") as f:
        return b"".join(line for _, line in zip(range(spec[1]), f))


def _check(name: str, path, content: bytes) -> None:
    """The reader returns or raises a BertkitError that names ``path`` (and a real line)."""
    path.write_bytes(content)
    try:
        READERS[name][0](path)
    except BertkitError as e:
        assert str(path) in str(e)
        if isinstance(e, DataFormatError) and e.line is not None:
            assert 1 <= e.line <= content.count(b"\n") + 1


@st.composite
def mutated(draw, base: bytes) -> bytes:
    """``base`` after 1-4 edits: delete, insert, replace, duplicate a slice, or truncate."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        n = len(data)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 64)))
        op = draw(st.sampled_from(["delete", "insert", "replace", "duplicate", "truncate"]))
        piece = draw(st.one_of(
            st.binary(min_size=1, max_size=8),
            st.sampled_from([b"\t", b"\n", b'"', b",", b"{", b"}", b"[", b"]", b":", b"-1",
                             b"1e400", b"\xff", b"\xc3", b"\x00", b"\r", b"\r\n",
                             b"\xef\xbb\xbf", b"null", b"true", b"B-", b"I-X", b"\x85",
                             b"\xe2\x80\xa8"]),
            st.sampled_from([b"9" * 5000, b"[" * 3000, b'{"a":' * 3000]),  # parser limits
            st.text(max_size=8).map(lambda t: t.encode("utf-8")),
        ))
        if op == "delete":
            del data[i:j]
        elif op == "insert":
            data[i:i] = piece
        elif op == "replace":
            data[i:j] = piece
        elif op == "duplicate":
            data[j:j] = data[i:j]
        else:
            del data[i:]
    return bytes(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


def _paths(obj, prefix=()):
    """Every path (tuple of keys / indices) to a value inside ``obj``, the root included."""
    yield prefix
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from _paths(value, prefix + (index,))


@st.composite
def json_mutated(draw, obj):
    """A deep copy of ``obj`` with 1-3 values replaced by random JSON, or removed."""
    obj = json.loads(json.dumps(obj))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(obj))))
        if not path:
            obj = draw(json_values)
            continue
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return obj


def _as_file(name: str, obj) -> bytes:
    """``obj`` written the way reader ``name`` expects JSON (whole file or one per line)."""
    if READERS[name][1] == ".jsonl" and isinstance(obj, list):
        return "\n".join(json.dumps(record) for record in obj).encode("utf-8")
    return json.dumps(obj, indent=1).encode("utf-8")


def _json_base(name: str):
    """The tiny file of a JSON reader as a Python object (JSONL: the list of records)."""
    text = READERS[name][2]
    if READERS[name][1] == ".jsonl":
        return [json.loads(line) for line in text.splitlines()]
    return json.loads(text)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("name", sorted(READERS))
def test_well_formed_fixtures_read(name, work):
    """The bases of the mutations are valid: the reader returns without error."""
    path = work / f"base{READERS[name][1]}"
    path.write_text(READERS[name][2], encoding="utf-8")
    assert READERS[name][0](path) is not None


@pytest.mark.parametrize("name", sorted(READERS))
@given(data=st.data())
def test_reader_on_bytes_and_mutated_files(name, work, data):
    """Arbitrary bytes, the tiny file mutated, the real file mutated (when present), and
    for JSON readers the tiny file's JSON with values replaced by arbitrary JSON."""
    sources = [st.binary(max_size=600), mutated(READERS[name][2].encode("utf-8"))]
    real = _real_bytes(name)
    if real is not None:
        sources.append(mutated(real))
    if READERS[name][1] in (".json", ".jsonl"):
        sources.append(json_mutated(_json_base(name)).map(lambda obj: _as_file(name, obj)))
    content = data.draw(st.one_of(sources))
    _check(name, work / f"fuzz{READERS[name][1]}", content)


@pytest.fixture(scope="module")
def parser():
    return build_parser()


@given(data=st.data())
def test_squad_eval_command_on_mutated_files(work, parser, data, capsys):
    """``squad-eval`` on mutated dataset/prediction/probability files: a result, or a
    BertkitError naming one of the files (which the CLI prints as a one-line error)."""
    def draw(obj):
        return data.draw(st.one_of(mutated(json.dumps(obj, indent=1).encode("utf-8")),
                                   json_mutated(obj).map(lambda o: json.dumps(o).encode("utf-8"))))

    (work / "d.json").write_bytes(draw(SQUAD_TINY))
    (work / "p.json").write_bytes(draw({"q1": "cat", "q2": ""}))
    (work / "n.json").write_bytes(draw({"q1": 0.1, "q2": 0.9}))
    args = parser.parse_args(["squad-eval", str(work / "d.json"), str(work / "p.json"),
                              "--na-prob", str(work / "n.json")])
    try:
        assert args.func(args) == 0
    except BertkitError as e:
        assert str(work) in str(e)
    capsys.readouterr()
