"""bench/table5_table.py and bench/dapt_table.py read what the runs wrote into one table."""

from __future__ import annotations

import json


def jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"torn', encoding="utf-8")


def pretrain_run(run, steps, nsp, mlm, precision="fp32", stop=False):
    rows = [{"step": 0, "event": "precision", "precision": precision, "reason": "as asked", "time": 0.0},
            {"step": steps, "loss": 1.0, "time": 10.0},
            {"step": steps, "eval_nsp_acc": nsp, "eval_mlm_acc": mlm, "time": 12.0}]
    if stop:
        rows.insert(2, {"step": steps, "event": "budget_stop", "time": 11.0})
    jsonl(run / "log.jsonl", rows)
    (run / "model").mkdir(parents=True)
    (run / "model" / "config.json").write_text("{}", encoding="utf-8")


def downstream(glue, stsb):
    glue.mkdir(parents=True)
    (glue / "results.json").write_text(json.dumps({
        "settings": {"precision": "auto"}, "average": stsb,
        "tasks": {"stsb": {"metric": "spearman", "lr": 3e-4, "mean": stsb, "std": 0.01,
                           "scores": [stsb - 0.01, stsb + 0.01]}}}), encoding="utf-8")


def seed_folder(root, stsb, nsp):
    pretrain_run(root / "pt-mlm_nsp", 3700, 0.7, 0.15)
    pretrain_run(root / "pt2-mlm_nsp", 8000, nsp, 0.2, stop=True)
    downstream(root / "pt2-mlm_nsp" / "glue", stsb)
    jsonl(root / "pt2-mlm_nsp" / "probe.jsonl", [{"task": "stsb", "pool": "cls", "probe": 0.3}])
    downstream(root / "random-init" / "glue", 0.16)
    jsonl(root / "machine.jsonl", [{"cpu": "Test CPU", "cores": 2, "native_bf16": True,
                                    "bf16_reason": "flags", "avx512_bf16": True, "avx512f": True,
                                    "torch": "x", "load_average": [1.0, 1.0, 1.0]}])
    return root


def test_table5_table_one_folder_and_the_spread_over_seeds(bench_module, tmp_path):
    t5 = bench_module("table5_table")
    a = seed_folder(tmp_path / "s1", 0.30, 0.85)
    b = seed_folder(tmp_path / "s2", 0.40, 0.89)
    text, data = t5.render([a, b])
    assert "Test CPU" in text and "avx512_bf16 yes" in text
    assert "3,700 steps, fp32; 70.0 / 15.0" in text
    assert "8,000 steps, fp32, budget stop; 85.0 / 20.0" in text
    assert "30.0 ± 1.0 (lr 0.0003)" in text and "| none |" in text
    over = data["over_folders"]["BERT"]
    assert over["stsb (spearman)"] == [30.0, 40.0]
    assert "| BERT | 2 |" in text and "35.0 ± 7.1" in text  # stdev of 30 and 40


def test_table5_table_says_the_fine_tuning_precision_the_runs_used(bench_module, tmp_path):
    t5 = bench_module("table5_table")
    folder = seed_folder(tmp_path / "s1", 0.3, 0.85)
    text, _ = t5.render([folder])
    assert "setting: auto; used: not logged" in text  # runs that predate the start event's field
    jsonl(folder / "pt2-mlm_nsp" / "glue" / "stsb" / "lr-0.0003_seed-1" / "log.jsonl",
          [{"event": "start", "precision": "bf16", "precision_reason": "auto: avx512_bf16"}])
    text, _ = t5.render([folder])
    assert "setting: auto; used: bf16" in text and "auto is fp32" not in text


def test_table5_table_cli_writes_markdown_and_json(bench_module, tmp_path):
    t5 = bench_module("table5_table")
    folder = seed_folder(tmp_path / "s1", 0.3, 0.85)
    assert t5.main([str(folder), "--output", str(folder / "table5.md")]) == 0
    assert (folder / "table5.md").read_text(encoding="utf-8").startswith("# Table 5")
    assert json.loads((folder / "table5.json").read_text(encoding="utf-8"))["folders"]


def finetune_run(run, lr, seed, dev, test):
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"best": {
        "lr": lr, "seed": seed, "epoch": 3, "metrics": {"accuracy": dev, "macro_f1": dev / 2}}}),
        encoding="utf-8")
    (run / "test.json").write_text(json.dumps({"metrics": {"dev": {"accuracy": test,
                                                                   "macro_f1": test / 2}}}),
                                   encoding="utf-8")


def test_dapt_table_chooses_the_rate_on_dev_and_marks_partial_rows(bench_module, tmp_path):
    dapt = bench_module("dapt_table")
    ft = tmp_path / "ft"
    finetune_run(ft / "checkpoint" / "lr-3e-4_seed-1", 3e-4, 1, 0.40, 0.10)
    finetune_run(ft / "checkpoint" / "lr-3e-4_seed-2", 3e-4, 2, 0.42, 0.12)
    finetune_run(ft / "checkpoint" / "lr-1e-3_seed-1", 1e-3, 1, 0.30, 0.90)
    finetune_run(ft / "checkpoint" / "lr-1e-3_seed-2", 1e-3, 2, 0.32, 0.90)
    finetune_run(ft / "domain" / "lr-1e-3_seed-1", 1e-3, 1, 0.50, 0.45)
    pretrain_run(tmp_path / "pt-domain", 900, 0.0, 0.4, stop=True)
    text, data = dapt.render(tmp_path, "fp32", "3e-4,1e-3", "1,2")
    check = data["rows"]["checkpoint"]
    assert check["lr"] == 3e-4 and check["test_accuracy"][0] == 11.0  # chosen on dev, not test
    assert data["rows"]["domain"]["partial"] and "1 (partial: 1 of" in text
    assert not check["partial"]
    assert "| domain | 900 / — | yes | 40.0 (step 900) | fp32 |" in text
