"""Feature-based NER: frozen encoder + BiLSTM tagger over chosen layers."""

from __future__ import annotations

import pytest
import torch

from bertkit.checkpoint import load_pretrained
from bertkit.config import BertConfig
from bertkit.errors import BertkitError
from bertkit.finetuning.config import FinetuneConfig
from bertkit.finetuning.loop import finetune
from bertkit.model import BertModel
from bertkit.runlog import RunLogger
from bertkit.tasks import get_task
from bertkit.tasks.feature_based import FeatureBasedTagger, build_feature_based, parse_layers
from bertkit.training import build_optimizer
from tests.finetune_helpers import make_model

from .test_ner import one_thread, write_toy_conll

CFG = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=32)


def encoder_state(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.bert.state_dict().items()}


def test_parse_layers():
    assert parse_layers("-1,-2,-3,-4") == [-1, -2, -3, -4]
    assert parse_layers(-1) == [-1] and parse_layers([0, 2]) == [0, 2]
    with pytest.raises(ValueError, match="comma-separated"):
        parse_layers("last")


@pytest.mark.parametrize("combine,width", [("concat", 4 * 16), ("sum", 16)])
def test_combined_features_and_logits(combine, width):
    torch.manual_seed(0)
    model = FeatureBasedTagger(BertModel(CFG, add_pooling_layer=False), 5, "-1,-2,-3,-4",
                               combine, lstm_hidden=8, lstm_layers=1)
    ids = torch.randint(5, 30, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    features = model.features(ids, attention_mask=mask)
    assert features.shape == (2, 7, width)
    hidden = model.bert(ids, attention_mask=mask, output_hidden_states=True).hidden_states
    expected = torch.cat(hidden[::-1], -1) if combine == "concat" else sum(hidden)
    assert torch.allclose(features, expected, atol=1e-6)
    labels = torch.full_like(ids, -100)
    labels[:, 1] = 2
    out = model.eval()(ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == (2, 7, 5) and out.loss.item() > 0


def test_layer_indices_are_checked():
    encoder = BertModel(CFG, add_pooling_layer=False)
    with pytest.raises(ValueError, match="4 hidden states"):
        FeatureBasedTagger(encoder, 3, [-1, -5])
    with pytest.raises(ValueError, match="distinct"):
        FeatureBasedTagger(encoder, 3, [-1, 3])
    with pytest.raises(ValueError, match="combine"):
        FeatureBasedTagger(encoder, 3, [-1], combine="max")


def test_training_steps_leave_the_encoder_unchanged():
    torch.manual_seed(0)
    model = FeatureBasedTagger(BertModel(CFG, add_pooling_layer=False), 4, [-1, -2],
                               lstm_hidden=8, lstm_layers=2).train()
    assert not model.bert.training and model.lstm.training
    assert all(not p.requires_grad for p in model.bert.parameters())
    before, head = encoder_state(model), model.classifier.weight.clone()
    optimizer = build_optimizer(model, 1e-2)
    ids = torch.randint(5, 30, (4, 6))
    labels = torch.randint(0, 4, (4, 6))
    with one_thread():
        for _ in range(3):
            optimizer.zero_grad()
            model(ids, labels=labels).loss.backward()
            optimizer.step()
    assert all(torch.equal(before[k], v) for k, v in model.bert.state_dict().items())
    assert not torch.equal(head, model.classifier.weight)


@pytest.fixture(scope="module")
def fb_run(tmp_path_factory):
    model_dir = make_model(tmp_path_factory.mktemp("model"))
    data = write_toy_conll(tmp_path_factory.mktemp("conll"))
    out = tmp_path_factory.mktemp("out")
    task = get_task("ner", feature_based=True, feature_layers="-1,-2,-3", combine="concat",
                    lstm_hidden=32, lstm_layers=1)
    cfg = FinetuneConfig(lr=2e-2, batch=16, epochs=4, max_seq_length=32, progress=False,
                         log_every=1000)
    with one_thread():
        runs, best = finetune(task, model_dir, data, out, cfg,
                              logger=RunLogger(out / "log.jsonl", echo=False))
    return model_dir, data, out, best


@pytest.mark.filterwarnings("ignore:.*not used by BertModel")
def test_feature_based_run_learns_with_a_frozen_encoder(fb_run):
    model_dir, data, out, best = fb_run
    assert best.metrics["f1"] > 0.6
    source = load_pretrained(model_dir, BertModel, add_pooling_layer=False).state_dict()
    trained = build_feature_based(out, 9, layers="-1,-2,-3", lstm_hidden=32, lstm_layers=1)
    assert all(torch.equal(source[k], v) for k, v in trained.bert.state_dict().items())


def test_saved_feature_based_model_reloads_from_its_options(fb_run):
    from bertkit.finetuning.evaluate import evaluate_sets, load_eval_sets
    from bertkit.modeldir.entry import saved_task_options
    from bertkit.tokenizer import BertTokenizer

    model_dir, data, out, best = fb_run
    name, options = saved_task_options(out)
    assert name == "ner" and options["feature_based"] is True
    task = get_task(name, **options)
    model = task.build_model(out)
    assert isinstance(model, FeatureBasedTagger) and model.settings["layers"] == [-1, -2, -3]
    tok = BertTokenizer.from_pretrained(out)
    metrics, _ = evaluate_sets(task, model, load_eval_sets(task, data, tok, 32, ["dev"]), 16)
    assert metrics["f1"] == pytest.approx(best.metrics["f1"])
    # the directory says it is a tagger even when the task is named without its options
    assert isinstance(get_task("conll2003").build_model(out), FeatureBasedTagger)


def test_bad_feature_layers_are_a_clear_error(tmp_path):
    model_dir = make_model(tmp_path / "model")
    task = get_task("ner", feature_based=True, feature_layers="-1,-2,-3,-4")
    with pytest.raises(BertkitError, match="3 hidden states"):
        task.build_model(model_dir)
