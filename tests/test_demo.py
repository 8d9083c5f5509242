"""``make demo`` end to end, shrunk: every stage runs and the fine-tuning prints a metric."""

from bertkit.demo import run_demo


def test_demo_runs_every_stage(tmp_path, capsys):
    metrics = run_demo(tmp_path, vocab_size=600, steps=4, finetune_epochs=1)
    out = capsys.readouterr().out
    for stage in range(1, 8):
        assert f"=== {stage}." in out
    assert (tmp_path / "pretrain-run" / "curves.png").stat().st_size > 0
    assert (tmp_path / "finetuned" / "model.safetensors").exists()
    assert 0.0 <= metrics["accuracy"] <= 1.0
