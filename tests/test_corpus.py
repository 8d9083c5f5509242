"""The built-in corpus comes from the standard library with no download."""

from bertkit.corpus import stdlib_documents, write_corpus


def test_stdlib_documents_layout(tmp_path):
    docs = stdlib_documents(max_documents=5, progress=False)
    assert len(docs) == 5 and all(len(d) >= 2 for d in docs)
    path = write_corpus(docs, tmp_path / "corpus.txt")
    blocks = path.read_text(encoding="utf-8").strip().split("\n\n")
    assert len(blocks) == 5


def test_package_classification_split():
    modules = [("pkg_a.one", ["A one.", "A two.", "A three."]), ("pkg_a.two", ["A four.", "A five."]),
               ("pkg_b.x", ["B one.", "B two.", "B three.", "B four.", "B five."]), ("solo", ["S.", "T."])]
    from bertkit.corpus import package_classification

    train, dev, labels = package_classification(modules, n_labels=2, dev_every=5)
    assert labels == ["pkg_a", "pkg_b"]
    assert [r["text"] for r in dev] == ["A five.", "B five."]
    assert len(train) == 8 and {r["label"] for r in train} == {"pkg_a", "pkg_b"}
