"""One head's attention map (pruned layers, long texts, booleans) and texts that are empty
once cleaned, refused like whitespace-only ones (issue 25 #9 #10 #35 #36 #62 #85 #158)."""

from __future__ import annotations

import warnings

import pytest

from bertkit.errors import InputError
from bertkit.inference import load
from bertkit.tokenizer.basic import is_blank
from tests.task_models import make_task_model

LONG = " ".join(["the man went to the store ."] * 40)  # far over the model's limit


@pytest.mark.parametrize("text, blank", [("   \t\n ", True), ("\x00\x01\x02", True), ("\u200b\u200b", True),
                                         ("\ufeff\u200d \u2060", True), ("", True), ("a\u200b", False),
                                         ("\ud800 bad", False), ("中", False)])
def test_is_blank_is_empty_after_the_tokenizer_cleans_it(text, blank):
    assert is_blank(text) is blank


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return load(make_task_model(tmp_path_factory.mktemp("m"), "sst2"))


@pytest.mark.parametrize("text", ["   ", "\x00\x01\x02", "\u200b\u200b"])
def test_control_or_zero_width_only_text_is_refused_like_whitespace(bert, text):
    with pytest.raises(InputError, match="is empty") as caught:
        bert.plan_predict(text)
    assert caught.value.kind == "invalid"
    with pytest.raises(InputError, match="is empty"):
        bert.attention(text)


def test_attention_refuses_a_long_text_unless_told_to_cut_it_and_then_says_so(bert):
    limit = bert.max_length
    with pytest.raises(InputError, match=f"more than the model's limit of {limit}") as caught:
        bert.attention(LONG)
    assert caught.value.kind == "too_long"
    with pytest.warns(UserWarning, match=rf"cut to the model's limit of {limit} tokens \(\d+ left out\)"):
        tokens, matrix = bert.attention(LONG, on_overflow="truncate")
    assert len(tokens) == limit and matrix.shape == (limit, limit)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a text that fits: no warning
        bert.attention("the man went", on_overflow="truncate")


@pytest.mark.parametrize("layer, head", [(True, 0), (0, True), (0.0, 0)])
def test_attention_refuses_booleans_and_floats(bert, layer, head):
    with pytest.raises(InputError, match="layer|head"):
        bert.attention("the man went", layer, head)


def test_attention_on_a_pruned_model_counts_the_heads_each_layer_kept(tmp_path):
    from bertkit.checkpoint import save_pretrained
    from bertkit.model.pruning import prune_heads
    from bertkit.tasks import get_task

    directory = make_task_model(tmp_path, "sst2")
    model = get_task("sst2").build_model(directory)
    prune_heads(model, {0: [1]})  # layer 0 keeps head 0 only
    save_pretrained(model, tmp_path / "pruned", tokenizer=load(directory).tokenizer)
    pruned = load(tmp_path / "pruned")
    tokens, matrix = pruned.attention("the man went", layer=0, head=0)
    assert matrix.shape == (len(tokens), len(tokens))
    with pytest.raises(InputError, match=r"head must be in 0..0 \(layer 0 keeps 1 of 2 heads after pruning\)"):
        pruned.attention("the man went", layer=0, head=1)
    assert pruned.attention("the man went", layer=1, head=1)[1].shape == matrix.shape  # layer 1 kept both


def test_cli_attention_warns_when_it_cuts_the_text(tmp_path, capsys):
    from bertkit.cli.main import main

    directory = make_task_model(tmp_path, "sst2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["attention", str(directory), LONG, "--out", str(tmp_path / "a.png")])
    said = capsys.readouterr().err + " ".join(str(w.message) for w in caught)
    assert code == 0 and "was cut to the model's limit of" in said


def test_serve_attention_refuses_a_boolean_layer(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bertkit.serve import ServeConfig, create_app

    directory = make_task_model(tmp_path, "sst2")
    with TestClient(create_app(ServeConfig(model=str(directory)))) as client:
        for body in ({"inputs": "a film", "layer": True, "head": 0},
                     {"inputs": "a film", "layer": 0, "head": False}):
            assert client.post("/attention", json=body).status_code == 422
        assert client.post("/attention", json={"inputs": "\u200b\u200b"}).status_code == 422
        blank = client.post("/predict", json={"inputs": "\x00\x01\x02"})  # TEI's 400 Empty
        assert blank.status_code == 400 and blank.json()["error_type"] == "Empty"
        long = client.post("/attention", json={"inputs": LONG})  # cut, and said so, as the CLI does
        assert long.status_code == 200 and "x-bertkit-truncated" in long.headers
        refused = client.post("/attention", json={"inputs": LONG, "truncate": False})
        assert refused.status_code == 413 and "limit of" in refused.text
