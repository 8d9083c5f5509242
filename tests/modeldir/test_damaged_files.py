"""A model directory with one damaged file: each is refused naming that file (2026-11-25
faults #198, #199, #259, #262, #264, #266, #272, #274, #285, #290, #291), through the same
door every command uses (``bertkit.inference.load``, the CLI's predict)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from bertkit.cli.main import main
from bertkit.errors import BertkitError
from bertkit.inference import load
from bertkit.modeldir.st_layout import read_st_pooling
from tests.task_models import make_task_model


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    directory = make_task_model(tmp_path_factory.mktemp("damaged"), "sst2")
    load(directory).tokenizer.save_pretrained(directory)  # tokenizer.json beside vocab.txt, as fine-tuning writes
    return directory


def damaged(model, tmp_path, name, change):
    copy = tmp_path / name
    shutil.copytree(model, copy)
    change(copy)
    return copy


def refused(directory, tmp_path, capsys) -> str:
    (tmp_path / "p.jsonl").write_text('{"sentence": "a fine film"}\n')
    code = main(["predict", "sst2", "--model", str(directory), "--input", str(tmp_path / "p.jsonl"),
                 "--output", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert code == 1 and "internal error" not in err and "JSONDecodeError" not in err, err
    return err


def test_the_undamaged_copy_predicts(model, tmp_path, capsys):
    (tmp_path / "p.jsonl").write_text('{"sentence": "a fine film"}\n')
    assert main(["predict", "sst2", "--model", str(model), "--input", str(tmp_path / "p.jsonl"),
                 "--output", str(tmp_path / "o.jsonl")]) == 0


def test_a_cut_config_json_is_named(model, tmp_path, capsys):
    d = damaged(model, tmp_path, "cfg", lambda d: (d / "config.json").write_bytes((d / "config.json").read_bytes()[:60]))
    assert f"{d}/config.json: not a readable JSON config" in refused(d, tmp_path, capsys)


def test_a_config_json_that_is_a_symlink_loop_is_named(model, tmp_path, capsys):
    def loop(d):
        (d / "config.json").unlink()
        os.symlink("config.json", d / "config.json")
    d = damaged(model, tmp_path, "loop", loop)
    assert f"{d}/config.json: a symbolic link that leads nowhere" in refused(d, tmp_path, capsys)


def test_cut_weights_are_named_by_predict(model, tmp_path, capsys):
    def cut(d):
        data = (d / "model.safetensors").read_bytes()
        (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    d = damaged(model, tmp_path, "cut", cut)
    assert f"{d}/model.safetensors: unreadable" in refused(d, tmp_path, capsys)


def test_a_corrupt_tokenizer_config_json_is_named(model, tmp_path, capsys):
    d = damaged(model, tmp_path, "tokcfg", lambda d: (d / "tokenizer_config.json").write_text('{"do_lower_case": x}'))
    assert f"{d}/tokenizer_config.json: not a readable JSON file" in refused(d, tmp_path, capsys)


def test_a_vocab_txt_with_a_bom_is_named(model, tmp_path, capsys):
    d = damaged(model, tmp_path, "bom", lambda d: (d / "vocab.txt").write_bytes(b"\xef\xbb\xbf" + (d / "vocab.txt").read_bytes()))
    assert f"{d}/vocab.txt:1: starts with a byte order mark" in refused(d, tmp_path, capsys)


def test_a_vocab_txt_in_another_order_than_tokenizer_json_is_refused(model, tmp_path, capsys):
    def swap(d):
        tokens = (d / "vocab.txt").read_text().split("\n")[:-1]
        tokens[-1], tokens[-2] = tokens[-2], tokens[-1]
        (d / "vocab.txt").write_text("\n".join(tokens) + "\n")
    d = damaged(model, tmp_path, "order", swap)
    assert "vocab.txt and tokenizer.json disagree (id" in refused(d, tmp_path, capsys)


def test_pooling_files_bertkit_cannot_serve_are_named(model, tmp_path):
    pool = tmp_path / "1_Pooling" / "config.json"
    pool.parent.mkdir()
    pool.write_text(json.dumps([{"pooling_mode_cls_token": True}]))
    with pytest.raises(BertkitError, match=r"1_Pooling/config.json: not a pooling config \(a JSON list"):
        read_st_pooling(tmp_path)
    pool.write_text(json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True}))
    with pytest.raises(BertkitError, match=r"sets several poolings \(cls_token, mean_tokens\)"):
        read_st_pooling(tmp_path)
    pool.write_text(json.dumps({"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}))
    assert read_st_pooling(tmp_path) == "mean"
