"""File helpers: atomic writes name the user's path (never a temporary one) and leave no
temporary file behind; an output never names an input."""

from __future__ import annotations

import os

import pytest

from bertkit.errors import BertkitError
from bertkit.fileio import atomic_path, atomic_write, check_not_input


def test_writing_over_a_directory_names_it_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "existing_dir"
    target.mkdir()
    for writer in (atomic_path, atomic_write):
        with pytest.raises(IsADirectoryError) as caught:
            with writer(target) as handle:
                if writer is atomic_path:
                    handle.write_bytes(b"x" * 1000)
                else:
                    handle.write("x" * 1000)
        assert caught.value.filename == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing_dir"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_place_where_nothing_can_be_created_is_named_as_given():
    with pytest.raises(OSError) as caught:
        with atomic_path("/proc/x.onnx"):
            pass
    assert caught.value.filename == "/proc/x.onnx"


def test_an_output_that_names_an_input_is_refused(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n")
    link = tmp_path / "link.txt"
    link.symlink_to(corpus)
    for output in (corpus, tmp_path / "." / "corpus.txt", link):
        with pytest.raises(BertkitError, match=r"--output .* would overwrite the --corpus"):
            check_not_input(output, [tmp_path / "other.txt", corpus], "--output", "--corpus")
    check_not_input(tmp_path / "vocab.txt", [corpus], "--output", "--corpus")  # no error


def test_tokenizer_train_never_replaces_its_corpus(tmp_path, capsys):
    from bertkit.cli.main import main

    corpus = tmp_path / "corp.txt"
    text = "the quick brown fox jumps over the lazy dog\n" * 50
    corpus.write_text(text)
    code = main(["tokenizer", "train", "--corpus", str(corpus), "--vocab-size", "60",
                 "--output", str(corpus)])
    assert code == 1 and "would overwrite the --corpus" in capsys.readouterr().err
    assert corpus.read_text() == text


def test_an_output_inside_an_input_directory_is_refused(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    link = tmp_path / "link"
    link.symlink_to(model)
    for output in (model / "model.safetensors", model / "new.onnx", link / "sub" / "dir"):
        with pytest.raises(BertkitError, match=f"^--out {output} lies inside the MODEL_DIR {model}: "
                                               "choose another --out$"):
            check_not_input(output, model, "--out", "MODEL_DIR")
    check_not_input(tmp_path / "model.onnx", model, "--out", "MODEL_DIR")  # beside it: fine
    assert (model / "model.safetensors").read_bytes() == b"weights"


def test_overwrite_never_replaces_a_directory_that_holds_an_input(tmp_path):
    base = tmp_path / "runs" / "base"
    base.mkdir(parents=True)
    check_not_input(tmp_path / "runs", base, "--out", "--model")  # nothing is deleted without it
    with pytest.raises(BertkitError, match=f"^--out {tmp_path / 'runs'} holds the --model {base}: "
                                           "--overwrite would delete it; choose another --out$"):
        check_not_input(tmp_path / "runs", base, "--out", "--model", overwrite=True)


@pytest.mark.parametrize("error", [
    RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 19776 vs 19670"),  # torch.save
    Exception("Error while serializing: I/O error: No space left on device (os error 28)"),  # safetensors
    OSError("100 requested and 40 written"),  # numpy's np.save
])
def test_atomic_path_names_its_file_on_a_full_disk(tmp_path, error):
    """2026-11-25 faults #293, #294, #301: quantize, export-onnx and embed said only 'no space
    left on device' on a full disk, with the writer's words and no file."""
    import errno as errno_

    target = tmp_path / "model.safetensors"
    with pytest.raises(OSError) as info:
        with atomic_path(target):
            raise error
    assert info.value.errno == errno_.ENOSPC and info.value.filename == str(target)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="not a disk"):  # other failures pass through unchanged
        with atomic_path(target):
            raise ValueError("not a disk")
