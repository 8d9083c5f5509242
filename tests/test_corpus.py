"""The built-in corpus comes from the standard library with no download."""

from bertkit.corpus import split_sentences, stdlib_documents, write_corpus


def test_split_sentences():
    assert split_sentences("Return the value. It is an int!  Maybe? no e.g. this") == [
        "Return the value.", "It is an int!", "Maybe? no e.g. this"]


def test_stdlib_documents_layout(tmp_path):
    docs = stdlib_documents(max_documents=5, progress=False)
    assert len(docs) == 5 and all(len(d) >= 2 for d in docs)
    path = write_corpus(docs, tmp_path / "corpus.txt")
    blocks = path.read_text(encoding="utf-8").strip().split("\n\n")
    assert len(blocks) == 5
