"""Fill-mask and embeddings API: batching by length, overflow, vocabulary checks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from bertkit.checkpoint import save_pretrained
from bertkit.config import BertConfig
from bertkit.errors import BertkitError, CheckpointError
from bertkit.inference import BertInference, length_batches, load
from bertkit.model import BertModel

tokenizer_module = pytest.importorskip("bertkit.tokenizer")

SENTENCES = ["the man went to the store .", "he is good", "a quick day", "she was bad , the night was good !"]


@pytest.fixture
def model_dir(make_mlm_dir):
    return make_mlm_dir(12)


def test_length_batches_sort_and_cover():
    batches = length_batches([3, 9, 1, 7, 5], 2, longest_first=True)
    assert [b.tolist() for b in batches] == [[1, 3], [4, 0], [2]]


def test_fill_mask_matches_a_direct_forward_pass(model_dir):
    bert = load(model_dir)
    result = bert.fill_mask("the man went to the [MASK] .", top_k=3)
    assert len(result) == 1 and len(result[0]) == 3
    enc = bert.tokenizer.encode("the man went to the [MASK] .")
    with torch.no_grad():
        logits = bert.model(torch.tensor([enc.input_ids])).logits[0]
    position = enc.input_ids.index(bert.tokenizer.mask_token_id)
    probs = logits[position].softmax(-1)
    top = probs.topk(3)
    assert [c["token"] for c in result[0]] == top.indices.tolist()
    assert np.allclose([c["score"] for c in result[0]], top.values.tolist(), atol=1e-5)
    assert result[0][0]["token_str"] == bert.tokenizer.convert_ids_to_tokens(top.indices[0].item())


def test_fill_mask_several_masks_and_batch_order(model_dir):
    bert = load(model_dir)
    texts = ["[MASK] man went to the [MASK] .", "he [MASK]", "the [MASK] was good !"]
    together = bert.fill_mask(texts, top_k=2, batch_size=2)
    assert [len(r) for r in together] == [2, 1, 1]
    for text, expected in zip(texts, together):
        alone = bert.fill_mask(text, top_k=2)
        assert [c["token"] for m in alone for c in m] == [c["token"] for m in expected for c in m]
    with pytest.raises(BertkitError, match="no \\[MASK\\]"):
        bert.fill_mask("no mask here")


def test_embed_pooling_layers_and_order(model_dir):
    bert = load(model_dir)
    features = bert.embed(SENTENCES, layers=(-1, -2), pool="cls", batch_size=3)
    assert features.shape == (4, 32) and features.dtype == np.float32
    with torch.no_grad():
        enc = bert.tokenizer.encode(SENTENCES[3])
        out = bert.encoder(torch.tensor([enc.input_ids]), output_hidden_states=True)
    direct = torch.cat([out.hidden_states[-1][0, 0], out.hidden_states[-2][0, 0]])
    assert np.allclose(features[3], direct.numpy(), atol=1e-5)
    summed = bert.embed(SENTENCES, layers=(-1, -2), combine="sum")
    assert np.allclose(summed, features[:, :16] + features[:, 16:], atol=1e-5)
    mean = bert.embed(SENTENCES[3], pool="mean")
    assert np.allclose(mean, out.last_hidden_state[0].mean(0).numpy(), atol=1e-5)
    tokens = bert.embed(SENTENCES, pool="none")
    assert [t.shape for t in tokens] == [(len(bert.tokenizer.encode(s).input_ids), 16) for s in SENTENCES]
    assert np.allclose(tokens[3], out.last_hidden_state[0].numpy(), atol=1e-5)
    pairs = bert.embed(["he is good"], pairs=["she was bad"], pool="cls")
    assert pairs.shape == (1, 16)
    with pytest.raises(ValueError, match="out of range"):
        bert.embed(SENTENCES, layers=(-4,))


def test_overflow_truncates_with_warning_or_errors(model_dir):
    bert = load(model_dir)
    long_text = " ".join(["good"] * 20)
    with pytest.warns(UserWarning, match="1 input\\(s\\) longer than 12 tokens were truncated"):
        features = bert.embed([long_text, "he is good"], pool="none")
    assert features[0].shape == (12, 16)
    with pytest.raises(BertkitError, match="input 1 has 22 tokens"):
        bert.embed([long_text], on_overflow="error")
    with pytest.raises(BertkitError, match="no \\[MASK\\]"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bert.fill_mask(long_text + " [MASK]")


def test_vocabulary_size_mismatch_is_an_error(tmp_path, tiny_vocab_file):
    shape = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    save_pretrained(BertModel(BertConfig(vocab_size=100, **shape)), tmp_path / "m")
    with pytest.raises(CheckpointError, match="vocabulary has 40 tokens but the model's vocab_size is 100"):
        load(tmp_path / "m", vocab=tiny_vocab_file)
    with pytest.raises(CheckpointError, match="--vocab"):
        load(tmp_path / "m")
    tok = tokenizer_module.BertTokenizer.from_file(tiny_vocab_file)
    encoder_only = BertInference(BertModel(BertConfig(vocab_size=40, **shape)), tok)
    with pytest.raises(CheckpointError, match="no masked-LM head"):
        encoder_only.fill_mask("[MASK]")


def test_bfloat16_and_unknown_device(model_dir):
    with pytest.warns(FutureWarning, match="precision='bf16'"):
        bert = load(model_dir, dtype="bfloat16")  # the deprecated spelling of precision bf16
    assert bert.precision == "bf16" and bert.model.dtype == torch.float32  # autocast, fp32 weights
    assert bert.embed(SENTENCES).dtype == np.float32
    if not torch.cuda.is_available():
        with pytest.raises(BertkitError, match="no CUDA"):
            load(model_dir, device="cuda")


def test_embed_fill_mask_and_predict_cut_long_inputs_at_one_limit(tmp_path):
    """A model fine-tuned at max_seq_length 48 (64 positions): the API's embed, the server's
    /embed plan and predict all cut a long text at 48 tokens, and fill-mask at the same 48."""
    from tests.task_models import make_task_model

    bert = load(make_task_model(tmp_path, "sst2"))
    assert bert.max_positions == 64 and bert.token_limit() == 48
    text = " ".join(["the man went to the store"] * 20)  # 120 words
    _, tokens = bert.embed(text, return_tokens=True)
    assert len(tokens) == 48
    assert len(bert.plan_embed(text).rows[0].input_ids) == 48
    assert len(bert.plan_predict(text).rows[0].input_ids) == 48
    masked = bert.encode([text + " [MASK]"])[0]
    assert len(masked.input_ids) == 48
    assert bert.token_limit(60) == 60 and bert.token_limit(500) == 64


def test_prompts_follow_sentence_transformers_rules(model_dir):
    bert, plain = load(model_dir), load(model_dir)
    assert bert.prompt_text() == "" and bert.prompts == {}
    with pytest.raises(BertkitError, match="'q' is not one of the model's prompts"):
        bert.embed(["a"], prompt_name="q")
    bert.prompts, bert.default_prompt_name = {"q": "the ", "d": "a "}, "q"
    assert (bert.prompt_text(), bert.prompt_text("d")) == ("the ", "a ")
    np.testing.assert_allclose(bert.embed(["man", "dog"]), plain.embed(["the man", "the dog"]), atol=0)
    np.testing.assert_allclose(bert.embed("man", prompt_name="d"), plain.embed("a man"), atol=0)
