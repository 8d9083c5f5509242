"""Vocabulary growth: new tokens get one id each and rows from their pieces; every old
token's outputs stay as they were; transformers loads the grown model."""

from __future__ import annotations

import warnings

import pytest
import torch

from bertkit.checkpoint import load_pretrained, load_tokenizer, save_pretrained
from bertkit.cli.main import main
from bertkit.config import BertConfig
from bertkit.errors import OptionError
from bertkit.model import BertForPreTraining
from bertkit.model.vocab_growth import grow_vocabulary, piece_ids, remap_vocabulary, top_new_words
from bertkit.tokenizer import BertTokenizer

NEW = ["unwanted", "storekeeper", "##edly"]


@pytest.fixture
def model_dir(tmp_path, tiny_vocab_file):
    """A saved 2-layer BertForPreTraining (MLM bias and all weights random) with the tiny vocab."""
    tok = BertTokenizer.from_file(tiny_vocab_file)
    config = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    torch.manual_seed(0)
    model = BertForPreTraining(config)
    with torch.no_grad():
        model.mlm_head.bias.normal_()
    save_pretrained(model, tmp_path / "m", tokenizer=tok)
    return tmp_path / "m"


def outputs(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]))
    return out.last_hidden_state, out.mlm_logits, out.nsp_logits


def test_grown_model_keeps_old_outputs_and_gives_new_tokens_one_id(model_dir):
    model, tok = load_pretrained(model_dir).eval(), load_tokenizer(model_dir)
    old_rows = model.bert.embeddings.word_embeddings.weight.detach().clone()
    old_bias = model.mlm_head.bias.detach().clone()
    ids = tok.encode("the man went to the store, he is good").input_ids
    before = outputs(model, ids)
    grown, added = grow_vocabulary(model, tok, NEW + ["the", "unwanted"])  # known/dups skipped
    assert added == NEW and len(grown) == len(tok) + 3
    assert grown.vocab.tokens[: len(tok)] == tok.vocab.tokens
    after = outputs(model, ids)
    assert (after[0] - before[0]).abs().max() <= 1e-6
    assert (after[1][..., : len(tok)] - before[1]).abs().max() <= 1e-6
    assert after[1].shape[-1] == len(grown)
    assert (after[2] - before[2]).abs().max() <= 1e-6
    # new rows (and biases): the mean of the pieces' rows under the old vocabulary
    rows = model.bert.embeddings.word_embeddings.weight
    assert model.mlm_head.decoder.weight is rows and model.config.vocab_size == len(grown)
    for token in NEW:
        pieces = piece_ids(tok, token)
        new_id = grown.vocab.token_to_id[token]
        assert torch.allclose(rows[new_id], old_rows[pieces].mean(0))
        assert torch.allclose(model.mlm_head.bias[new_id], old_bias[pieces].mean())
    assert tok.tokenize("unwanted") == ["un", "##want", "##ed"]
    assert grown.tokenize("unwanted") == ["unwanted"]
    assert piece_ids(tok, "##edly") == [tok.vocab.token_to_id["##ed"], tok.vocab.token_to_id["##ly"]]


def test_cli_grows_a_model_directory_that_transformers_loads(model_dir, tmp_path, capsys):
    assert main(["grow-vocab", str(model_dir), "--out", str(tmp_path / "g"), "--add", ",".join(NEW)]) == 0
    assert "vocabulary 40 -> 43 tokens (3 added: unwanted storekeeper ##edly)" in capsys.readouterr().out
    ours = load_pretrained(tmp_path / "g").eval()
    tok = load_tokenizer(tmp_path / "g")
    ids = tok.encode("the unwanted storekeeper went").input_ids
    assert tok.convert_ids_to_tokens(ids)[2:4] == ["unwanted", "storekeeper"]
    transformers = pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs, info = transformers.BertForPreTraining.from_pretrained(str(tmp_path / "g"),
                                                                       output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    with torch.no_grad():
        reference = theirs.eval()(torch.tensor([ids])).prediction_logits
    assert (outputs(ours, ids)[1] - reference).abs().max() <= 1e-5
    fast = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "g"))
    assert fast("the unwanted storekeeper went")["input_ids"] == ids


def test_top_new_words_of_a_corpus(model_dir, tmp_path, capsys):
    tok = load_tokenizer(model_dir)
    lines = ["the storekeeper went", "Storekeeper, storekeeper!", "quickly unwanted", "unwanted once"]
    assert top_new_words(tok, lines, 5) == ["storekeeper", "unwanted"]
    assert top_new_words(tok, lines, 5, min_count=1)[:2] == ["storekeeper", "unwanted"]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    assert main(["grow-vocab", str(model_dir), "--out", str(tmp_path / "g"), "--corpus", str(corpus),
                 "--top", "1"]) == 0
    assert load_tokenizer(tmp_path / "g").vocab.tokens[-1] == "storekeeper"


def test_a_token_the_tokenizer_never_produces_is_refused(model_dir, tmp_path, capsys):
    model, tok = load_pretrained(model_dir), load_tokenizer(model_dir)
    with pytest.raises(OptionError, match=r"token 'Storekeeper'.*reads the text as \['storekeeper'\]"):
        grow_vocabulary(model, tok, ["Storekeeper"])
    assert main(["grow-vocab", str(model_dir), "--out", str(tmp_path / "g"), "--add", "the"]) == 1
    assert "no new token to add" in capsys.readouterr().err


def test_remap_keeps_shared_rows(model_dir):
    model, tok = load_pretrained(model_dir), load_tokenizer(model_dir)
    old_rows = model.bert.embeddings.word_embeddings.weight.detach().clone()
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "store", "unwanted", "the"]
    assert remap_vocabulary(model, tok, tokens) == (7, 1)
    rows = model.bert.embeddings.word_embeddings.weight
    for index, token in enumerate(tokens):
        if token != "unwanted":
            assert torch.equal(rows[index], old_rows[tok.vocab.token_to_id[token]])
    assert rows.shape[0] == 8 and model.mlm_head.bias.shape[0] == 8
