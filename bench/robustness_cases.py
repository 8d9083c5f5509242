"""Re-run the bad-input and fault cases of the newcomer/reliability report against this tree.

Usage: ``python bench/robustness_cases.py [SCRATCH_DIR] [--only NAME,NAME] [--jobs 2]``
(needs ``../shared/data`` beside the repository; a few fault cases need root for a tmpfs).
Every case runs ``python -m bertkit.cli.main ...`` (or a small bash script) under a timeout in
a scratch folder holding ``data/``, ``models/``, ``base/`` made here (tiny: cases stay short),
and gets a verdict from what it printed:

* HANG (timeout), CRASH (killed by a signal), TRACEBACK (a Python traceback on the output);
* an error exit: CLEAR ERROR when the message matches the case's ``expect`` pattern (the
  file, line or option it must name), else UNCLEAR ERROR;
* exit 0: SILENT WRONG when the case expects an error, WARNED when a warning was printed,
  else OK.

Writes ``SCRATCH_DIR/results.json`` and prints the Markdown table of ``docs/robustness.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
PY = sys.executable
TINY = str(SHARED / "models" / "bert-tiny-splade")
GLUE = SHARED / "glue"
SQUAD = SHARED / "squad"
KJV = SHARED / "corpus" / "kjv.txt"
BASE_VOCAB = SHARED / "vocab" / "bert-base-uncased-vocab.txt"
B = f"{PY} -m bertkit.cli.main"  # "bertkit" in the commands below


def run(cmd: str, cwd: Path, timeout: int = 300) -> tuple[int | None, str, str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "BERTKIT_DEBUG": ""}
    start = time.perf_counter()
    try:
        proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True,
                              text=True, errors="replace", timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err, time.perf_counter() - start


def run_forked(argv: list[str], cwd: Path, timeout: int = 300):
    """``bertkit ARGV`` in a child forked from this process, which has already imported
    bertkit and torch (a new interpreter per case costs 5-10 s on a loaded machine).
    Returns what :func:`run` returns; the child is killed after ``timeout`` seconds."""
    import signal
    import tempfile

    out_f, err_f = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.chdir(cwd)
            os.dup2(out_f.fileno(), 1)
            os.dup2(err_f.fileno(), 2)
            sys.stdout = os.fdopen(1, "w", closefd=False)
            sys.stderr = os.fdopen(2, "w", closefd=False)
            from bertkit.cli.main import main as cli

            code = cli(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = start + timeout
    status = None
    while time.perf_counter() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    code = None if status is None else os.waitstatus_to_exitcode(status)
    texts = []
    for f in (out_f, err_f):
        f.seek(0)
        texts.append(f.read().decode(errors="replace"))
        f.close()
    return code, texts[0], texts[1], time.perf_counter() - start


def run_case_command(cmd: str, cwd: Path, timeout: int = 300):
    """Plain ``bertkit ...`` commands run forked; scripts (``;``, ``&&``, pipes) in bash."""
    import shlex

    if cmd.startswith(B + " ") and not any(c in cmd for c in ";&|>$"):
        return run_forked(shlex.split(cmd[len(B) + 1:]), cwd, timeout)
    return run(cmd, cwd, timeout)


# ------------------------------------------------------------------ fixtures
def _write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")


def _tsv(rows, header="text\tlabel") -> str:
    return header + "\n" + "".join(f"{t}\t{label}\n" for t, label in rows)


def make_fixtures(s: Path) -> None:
    """Inputs of the cases, made small; the base model and data are built with bertkit."""
    d = s / "data"
    rng = random.Random(0)
    words = "good bad fine awful great poor nice dull lovely grim".split()
    ok_rows = [(" ".join(rng.choice(words) for _ in range(6)), "pos" if i % 2 else "neg") for i in range(60)]
    dev_rows = [(" ".join(rng.choice(words) for _ in range(6)), "pos" if i % 2 else "neg") for i in range(20)]
    _write(d / "empty.txt", "")
    _write(d / "garbage.bin", bytes(rng.randrange(128, 256) for _ in range(4096)))
    _write(d / "latin1.txt", "In the beginning caf\xe9 was\n".encode("latin-1"))
    _write(d / "onedoc.txt", "the lord spake unto moses .\nand moses went up .\n")
    _write(d / "longline.txt", "x" * 5_000_000 + "\n\nthe end .\nreally .\n\nanother doc .\n")
    _write(d / "longline_only.txt", "x" * 5_000_000 + "\n")
    _write(d / "longline_words.txt", " ".join(["word"] * 1_000_000) + "\n")
    for name, rows, dev in [("tsv_ok", ok_rows, dev_rows),
                            ("tsv_missinglabel", ok_rows[:7] + [("a blank one", "")] + ok_rows[7:], dev_rows),
                            ("tsv_unknownlabel_dev", ok_rows, dev_rows + [("meh", "neutral")])]:
        _write(d / name / "train.tsv", _tsv(rows))
        _write(d / name / "dev.tsv", _tsv(dev))
    _write(d / "tsv_empty" / "train.tsv", "")
    _write(d / "tsv_headeronly" / "train.tsv", "text\tlabel\n")
    _write(d / "tsv_fewcols" / "train.tsv", _tsv(ok_rows[:6]) + "lonely\n")
    _write(d / "tsv_wrongcols" / "train.tsv", _tsv(ok_rows[:6]) + "a\tb\tc\td\n")
    _write(d / "tsv_latin1" / "train.tsv", (_tsv(ok_rows[:4]) + "caf\xe9\tpos\n").encode("latin-1"))
    _write(d / "tsv_garbage" / "train.tsv", b"text\tlabel\n" + bytes(rng.randrange(128, 256) for _ in range(500)))
    long_rows = [(" ".join(rng.choice(words) for _ in range(760)), "pos" if i % 2 else "neg") for i in range(8)]
    _write(d / "tsv_long" / "train.tsv", _tsv(long_rows))
    _write(d / "tsv_long" / "dev.tsv", _tsv(long_rows[:4]))
    for t in ("tsv_empty", "tsv_headeronly", "tsv_fewcols", "tsv_wrongcols", "tsv_latin1", "tsv_garbage"):
        _write(d / t / "dev.tsv", _tsv(dev_rows))
    sst = [(" ".join(rng.choice(words) for _ in range(5)), str(i % 2)) for i in range(10)]
    for name, extra in [("sst2_badlabel", "odd one\t2\n"), ("sst2_emptylabel", "odd one\t\n"),
                        ("sst2_nolabel", "odd one\n"), ("sst2_textlabel", "odd one\tpositive\n")]:
        _write(d / name / "train.tsv", _tsv(sst, "sentence\tlabel") + extra)
        _write(d / name / "dev.tsv", _tsv(sst, "sentence\tlabel"))
    _write(d / "sst2_noheader" / "train.tsv", "".join(f"{t}\t{label}\n" for t, label in sst))
    conll = "".join(f"{w} NNP B-NP {t}\n" for w, t in [("EU", "B-ORG"), ("rejects", "O"), ("German", "B-MISC")]) + "\n"
    conll_ok = conll * 6
    _write(d / "conll_ok" / "train.txt", conll_ok)
    _write(d / "conll_ok" / "dev.txt", conll_ok)
    for name, tail in [("conll_badtag", "Paris NNP B-NP X-LOC\n"), ("conll_itag", "Fooland NNP B-NP I-FOO\n"),
                       ("conll_oneword", "lonely\n")]:
        _write(d / name / "train.txt", conll_ok + tail)
        _write(d / name / "dev.txt", conll_ok)
    _write(d / "conll_spaces" / "train.txt", conll_ok.replace("\n\n", "\n   \n"))
    _write(d / "conll_spaces" / "dev.txt", conll_ok)
    _write(d / "conll_tabs" / "train.txt", conll_ok.replace(" ", "\t"))
    _write(d / "conll_tabs" / "dev.txt", conll_ok)
    _write(d / "ce_ok.txt", "John B-PER B-PER\nlives O O\nin O O\nParis B-LOC B-LOC\n. O O\n")
    _write(d / "ce_badtag.txt", "John B-PER B-PER\n\nx O O\ny O O\nz O ZZZ\n")
    _write(d / "ce_short.txt", "John B-PER B-PER\nlives O\n")
    _write(d / "pred_badjsonl.jsonl", '{"sentence": "fine"}\n{"sentence": "bro\n')
    _write(d / "pred_blank.jsonl", '{"sentence": "good"}\n\n\n{"sentence": "bad"}\n')
    _write(d / "pred_intfield.jsonl", '{"sentence": "good"}\n{"sentence": 5}\n')
    _write(d / "pred_nofield.jsonl", '{"words": "good"}\n')
    _write(d / "pred_wrongfield.jsonl", '{"text": "good"}\n')
    # SQuAD
    dev11 = json.loads((SQUAD / "dev-v1.1.json").read_text())
    small = {"version": "1.1", "data": dev11["data"][:1]}
    _write(d / "squad_small.json", json.dumps(small))
    raw = json.dumps(dev11)
    _write(d / "squad_truncated.json", raw[: len(raw) // 2])
    wrong = json.loads(json.dumps(small))
    wrong["data"][0]["paragraphs"][0]["context"] = ["not", "a", "string"]
    _write(d / "squad_wrongtypes_ctx.json", json.dumps(wrong))
    _write(d / "squad_wrongtypes_data.json", json.dumps({"version": "1.1", "data": {"a": 1}}))
    wrong = json.loads(json.dumps(small))
    wrong["data"][0]["paragraphs"][0]["qas"][0] = "a question"
    _write(d / "squad_wrongtypes_q.json", json.dumps(wrong))
    preds2 = json.loads((SQUAD / "bert-predictions-dev-v2.0.json").read_text())
    _write(d / "naprob_bad.json", json.dumps({qid: "high" for qid in preds2}))
    _write(d / "naprob_partial.json", json.dumps({qid: 0.5 for qid in list(preds2)[:100]}))
    preds1 = json.loads((SQUAD / "bert-predictions-dev-v1.1.json").read_text())
    _write(d / "pred_missing_v11.json", json.dumps(dict(list(preds1.items())[1000:])))
    _write(d / "pred_missing_v2.json", json.dumps(dict(list(preds2.items())[1000:])))
    _write(d / "pred_emptyobj.json", "{}")
    _write(d / "pred_extra.json", json.dumps({**preds2, "zz1": "x", "zz2": "y"}))
    _write(d / "pred_list.json", "[]")
    _write(d / "pred_nonstring.json", json.dumps({**preds2, next(iter(preds2)): 5}))
    _write(d / "pred_onlyextra.json", json.dumps({"zz1": "x"}))
    p2 = json.dumps(preds2)
    _write(d / "pred_truncated.json", p2[:5000])
    sq_train = {"version": "1.1", "data": dev11["data"][:1]}
    for name, change in [("sq_ok", None), ("sq_answers_dict", ("answers", {"text": "x"})),
                         ("sq_question_int", ("question", 7)), ("sq_start_neg", ("answer_start", -5)),
                         ("sq_start_oob", ("answer_start", 1_000_000)), ("sq_start_str", ("answer_start", "5"))]:
        data = json.loads(json.dumps(sq_train))
        qa = data["data"][0]["paragraphs"][0]["qas"][1]
        if change and change[0] == "answer_start":
            qa["answers"][0]["answer_start"] = change[1]
        elif change:
            qa[change[0]] = change[1]
        _write(d / name / "train-v1.1.json", json.dumps(data))
        _write(d / name / "dev-v1.1.json", json.dumps(sq_train))
    ctx_null = json.loads(json.dumps(sq_train))
    ctx_null["data"][0]["paragraphs"][0]["context"] = None
    _write(d / "sq_context_null" / "train-v1.1.json", json.dumps(ctx_null))
    _write(d / "sq_context_null" / "dev-v1.1.json", json.dumps(sq_train))
    _write(d / "sq_trunc" / "train-v1.1.json", json.dumps(sq_train)[:4300])
    _write(d / "sq_trunc" / "dev-v1.1.json", json.dumps(sq_train))
    # vocabularies
    vocab = BASE_VOCAB.read_text(encoding="utf-8").splitlines()
    _write(d / "vocab_blanklines.txt", "\n".join(vocab[:6] + [""] + vocab[6:]) + "\n")
    _write(d / "vocab_dup.txt", "\n".join(vocab + [vocab[2000]]) + "\n")
    _write(d / "vocab_empty.txt", "")
    _write(d / "vocab_latin1.txt", ("\n".join(vocab[:50]) + "\ncaf\xe9\n").encode("latin-1"))
    _write(d / "vocab_nocls.txt", "\n".join(t for t in vocab if t != "[CLS]") + "\n")
    _write(d / "vocab_nounk.txt", "\n".join("[UNUSED_X]" if t == "[UNK]" else t for t in vocab) + "\n")
    shuffled = vocab[:1000] + random.Random(1).sample(vocab[1000:], len(vocab) - 1000)
    _write(d / "vocab_shuffled.txt", "\n".join(shuffled) + "\n")
    _write(d / "vocab_copy.txt", "\n".join(vocab) + "\n")
    _write(d / "vocab_small.txt", "\n".join(vocab[:5000]) + "\n")
    _write(d / "tsv_quote" / "train.tsv", _tsv(ok_rows[:7] + [('"a quoted" text', "pos")] + ok_rows[7:]))
    _write(d / "tsv_quote" / "dev.tsv", _tsv(dev_rows))
    _write(d / "kjv_latin1_tail.txt", KJV.read_bytes() + "caf\xe9\n".encode("latin-1"))


def make_base(s: Path) -> None:
    """Base data and models, made with bertkit itself (tiny and short)."""
    steps = [
        f"{B} pretrain-data --input {KJV} --vocab {BASE_VOCAB} --output base/kjv-data64 "
        "--max-seq-length 64 --max-predictions-per-seq 10 --dupe-factor 1 --no-progress",
        f"{B} pretrain --data base/kjv-data64 --vocab {BASE_VOCAB} --out base/probe --model-size tiny "
        "--steps 10 --batch-size 8 --save-every 5 --log-every 5 --no-progress",
        f"{B} convert {TINY} models/ok",
        f"{B} finetune sst2 --model {TINY} --data {GLUE}/SST-2 --out out/ft_sst2_base "
        "--max-train-examples 200 --epochs 1 --batch-size 16 --max-seq-length 32 --no-progress",
        f"{B} finetune text-classification --model {TINY} --data data/tsv_ok --out out/ft_tsv_ok "
        "--epochs 1 --batch-size 8 --max-seq-length 32 --no-progress",
    ]
    for cmd in steps:
        code, out, err, _ = run(cmd, s, timeout=600)
        if code != 0:
            raise SystemExit(f"base step failed ({code}): {cmd}\n{err[-2000:]}")
    models = s / "models"
    cfg = json.loads((models / "ok" / "config.json").read_text())
    for name, change in [("cfg_act_unknown", {"hidden_act": "swishy"}),
                         ("cfg_dropout_bad", {"hidden_dropout_prob": 1.5}),
                         ("cfg_heads_indivisible", {"num_attention_heads": 3}),
                         ("cfg_neg_layers", {"num_hidden_layers": -1}),
                         ("cfg_string_hidden", {"hidden_size": "128"}),
                         ("cfg_zero_layers", {"num_hidden_layers": 0}),
                         ("cfg_more_layers", {"num_hidden_layers": 4}),
                         ("cfg_vocab_mismatch", {"vocab_size": 40000})]:
        shutil.copytree(models / "ok", models / name, dirs_exist_ok=True)
        (models / name / "config.json").write_text(json.dumps({**cfg, **change}))
    make_extra_models(s)
    for name, text in [("cfg_empty", ""), ("cfg_notjson", "{'a': 1}"), ("cfg_list", "[1, 2]")]:
        shutil.copytree(models / "ok", models / name, dirs_exist_ok=True)
        (models / name / "config.json").write_text(text)
    (models / "empty_dir").mkdir(exist_ok=True)
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(str(models / "ok" / "model.safetensors"))
    variants = {
        "st_nan": {k: (v.clone().fill_(float("nan")) if "word_embeddings" in k else v) for k, v in weights.items()},
        "st_missing_emb": {k: v for k, v in weights.items() if "word_embeddings" not in k},
        "st_wrongshape": {k: (v[:64] if k.endswith("layer.0.attention.self.query.weight") else v)
                          for k, v in weights.items()},
        "st_float64": {k: v.double() for k, v in weights.items()},
    }
    for name, tensors in variants.items():
        shutil.copytree(models / "ok", models / name, dirs_exist_ok=True)
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(models / name / "model.safetensors"))
    raw = (models / "ok" / "model.safetensors").read_bytes()
    for name, data in [("st_empty", b""), ("st_truncated", raw[: len(raw) // 2]),
                       ("st_garbage", bytes(random.Random(2).randrange(256) for _ in range(5000))),
                       ("st_header_only", raw[:100])]:
        shutil.copytree(models / "ok", models / name, dirs_exist_ok=True)
        (models / name / "model.safetensors").write_bytes(data)
    evil_cmd = f"touch {s}/PWNED"
    for name in ("bin_evil_torchsave", "bin_evil_rawpickle", "bin_ok"):
        shutil.copytree(models / "ok", models / name, dirs_exist_ok=True)
        (models / name / "model.safetensors").unlink()
    torch.save(weights, models / "bin_ok" / "pytorch_model.bin")

    class Evil:
        def __reduce__(self):
            return (os.system, (evil_cmd,))

    torch.save({"w": Evil()}, models / "bin_evil_torchsave" / "pytorch_model.bin")
    import pickle

    (models / "bin_evil_rawpickle" / "pytorch_model.bin").write_bytes(pickle.dumps({"w": Evil()}))


def make_extra_models(s: Path) -> None:
    """Config variants with a field missing or zero (idempotent)."""
    models = s / "models"
    cfg = json.loads((models / "ok" / "config.json").read_text())
    for name, drop in [("cfg_missing_hidden", "hidden_size"), ("cfg_missing_vocab", "vocab_size")]:
        shutil.copytree(models / "ok", models / name, dirs_exist_ok=True)
        (models / name / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != drop}))
    shutil.copytree(models / "ok", models / "cfg_type_vocab0", dirs_exist_ok=True)
    (models / "cfg_type_vocab0" / "config.json").write_text(json.dumps({**cfg, "type_vocab_size": 0}))


# ------------------------------------------------------------------ cases
FT = f"--model {TINY} --epochs 1 --batch-size 8 --max-seq-length 32 --no-progress"
PT = f"--data base/kjv-data64 --vocab {BASE_VOCAB} --model-size tiny --no-progress"
FM = "'the lord [MASK] unto moses .' --top-k 3"

# (report number, name, command, kind, expect): kind "error" (must fail with a message
# matching expect), "ok" (must succeed; expect, if given, must appear), "warn" (succeeds
# with a warning matching expect)
CASES: list[tuple[str, str, str, str, str]] = [
    ("16", "conll_badtag", f"{B} finetune conll2003 {FT} --data data/conll_badtag --out out/c1", "error", r"train.txt:\d+: unknown tag 'X-LOC'"),
    ("17", "conll_itag", f"{B} finetune conll2003 {FT} --data data/conll_itag --out out/c2", "error", r"train.txt:\d+: unknown entity type 'FOO'"),
    ("18", "conll_oneword", f"{B} finetune conll2003 {FT} --data data/conll_oneword --out out/c3", "error", r"train.txt:\d+: expected"),
    ("19", "conll_spaces", f"{B} finetune conll2003 {FT} --data data/conll_spaces --out out/c4", "ok", ""),
    ("20", "conll_tabs", f"{B} finetune conll2003 {FT} --data data/conll_tabs --out out/c5", "ok", ""),
    ("21", "conlleval_badtag", f"{B} conll-eval data/ce_badtag.txt", "error", r"ce_badtag.txt:5: unknown tag 'ZZZ'"),
    ("22", "conlleval_empty", f"{B} conll-eval data/empty.txt", "error", r"empty.txt: no tagged tokens"),
    ("23", "conlleval_garbage", f"{B} conll-eval data/garbage.bin", "error", r"garbage.bin:1: not valid UTF-8"),
    ("24", "conlleval_short", f"{B} conll-eval data/ce_short.txt", "error", r"ce_short.txt:2: expected 3"),
    ("25", "glue_sst2_badlabel", f"{B} finetune sst2 {FT} --data data/sst2_badlabel --out out/g1", "error", r"train.tsv:12: unknown label '2'"),
    ("26", "glue_sst2_emptylabel", f"{B} finetune sst2 {FT} --data data/sst2_emptylabel --out out/g2", "error", r"train.tsv:12: (unknown|empty) label"),
    ("27", "glue_sst2_noheader", f"{B} finetune sst2 {FT} --data data/sst2_noheader --out out/g3", "error", r"train.tsv:1: sst2: header lacks"),
    ("28", "glue_sst2_nolabel", f"{B} finetune sst2 {FT} --data data/sst2_nolabel --out out/g4", "error", r"train.tsv:12: expected 2"),
    ("29", "glue_sst2_textlabel", f"{B} finetune sst2 {FT} --data data/sst2_textlabel --out out/g5", "error", r"train.tsv:12: unknown label 'positive'"),
    ("30", "longline_embed_1M_words", f"{B} embed {TINY} --input data/longline_words.txt --output out/emb_1m.npy", "warn", r"truncated"),
    ("31", "longline_fillmask_input", f"{B} fill-mask {TINY} --input data/longline_only.txt", "error", r"no \[MASK\].*more characters cut"),
    ("33", "longline_toktrain", f"{B} tokenizer train --corpus data/longline.txt --vocab-size 100 --output out/v_long.txt", "ok", ""),
    ("34", "predict_badjson", f"{B} predict sst2 --model out/ft_sst2_base --input data/pred_badjsonl.jsonl --output out/p1.jsonl", "error", r"pred_badjsonl.jsonl:2: invalid JSON"),
    ("35", "predict_blank", f"{B} predict sst2 --model out/ft_sst2_base --input data/pred_blank.jsonl --output out/p6.jsonl", "ok", ""),
    ("36", "predict_empty", f"{B} predict sst2 --model out/ft_sst2_base --input data/empty.txt --output out/p5.jsonl", "error", r"empty.txt: no input records"),
    ("37", "predict_garbage", f"{B} predict sst2 --model out/ft_sst2_base --input data/garbage.bin --output out/p4.jsonl", "error", r"garbage.bin:1: not valid UTF-8"),
    ("38", "predict_intfield", f"{B} predict sst2 --model out/ft_sst2_base --input data/pred_intfield.jsonl --output out/p3.jsonl", "error", r"pred_intfield.jsonl:2: field 'sentence'"),
    ("39", "predict_nofield", f"{B} predict sst2 --model out/ft_sst2_base --input data/pred_nofield.jsonl --output out/p8.jsonl", "error", r"pred_nofield.jsonl:1: missing text field \(one of 'sentence', 'text', 'text_a'\)"),
    ("40", "predict_wrongfield", f"{B} predict sst2 --model out/ft_sst2_base --input data/pred_wrongfield.jsonl --output out/p2.jsonl", "ok", ""),
    ("41", "ptdata_empty", f"{B} pretrain-data --input data/empty.txt --vocab {BASE_VOCAB} --output out/pd1 --quiet", "error", r"empty.txt: the corpus holds no text"),
    ("42", "ptdata_garbage", f"{B} pretrain-data --input data/garbage.bin --vocab {BASE_VOCAB} --output out/pd2 --quiet", "error", r"garbage.bin:1: not valid UTF-8 \(invalid \w+ byte at byte \d+ of the line"),
    ("43", "ptdata_latin1", f"{B} pretrain-data --input data/latin1.txt --vocab {BASE_VOCAB} --output out/pd3 --quiet", "error", r"latin1.txt:1: not valid UTF-8"),
    ("44", "ptdata_longline", f"{B} pretrain-data --input data/longline.txt --vocab {BASE_VOCAB} --output out/pd4 --quiet", "ok", ""),
    ("45", "ptdata_onedoc", f"{B} pretrain-data --input data/onedoc.txt --vocab {BASE_VOCAB} --output out/pd5 --quiet", "error", r"onedoc.txt: found 1 document"),
    ("47", "squadeval_data_empty", f"{B} squad-eval data/empty.txt {SQUAD}/bert-predictions-dev-v1.1.json", "error", r"empty.txt:1: invalid JSON"),
    ("48", "squadeval_data_garbage", f"{B} squad-eval data/garbage.bin {SQUAD}/bert-predictions-dev-v1.1.json", "error", r"garbage.bin:1: not valid UTF-8"),
    ("49", "squadeval_data_truncated", f"{B} squad-eval data/squad_truncated.json {SQUAD}/bert-predictions-dev-v1.1.json", "error", r"squad_truncated.json:1: invalid JSON"),
    ("50", "squadeval_data_wrongtypes_ctx", f"{B} squad-eval data/squad_wrongtypes_ctx.json {SQUAD}/bert-predictions-dev-v1.1.json", "ok", ""),
    ("51", "squadeval_data_wrongtypes_data", f"{B} squad-eval data/squad_wrongtypes_data.json {SQUAD}/bert-predictions-dev-v1.1.json", "error", r"squad_wrongtypes_data.json: top level: field 'data' should be a list"),
    ("52", "squadeval_data_wrongtypes_q", f"{B} squad-eval data/squad_wrongtypes_q.json {SQUAD}/bert-predictions-dev-v1.1.json", "error", r"squad_wrongtypes_q.json: article 0 paragraph 0 question 0: "),
    ("53", "squadeval_naprob_bad", f"{B} squad-eval {SQUAD}/dev-v2.0.json {SQUAD}/bert-predictions-dev-v2.0.json --na-prob data/naprob_bad.json", "error", r"naprob_bad.json: the no-answer probability for \S+ is not a number"),
    ("54", "squadeval_naprob_partial", f"{B} squad-eval {SQUAD}/dev-v2.0.json {SQUAD}/bert-predictions-dev-v2.0.json --na-prob data/naprob_partial.json", "error", r"lack a no-answer probability"),
    ("55", "squadeval_pred_emptyobj", f"{B} squad-eval {SQUAD}/dev-v1.1.json data/pred_emptyobj.json", "error", r"pred_emptyobj.json: no question"),
    ("56", "squadeval_pred_extra", f"{B} squad-eval {SQUAD}/dev-v2.0.json data/pred_extra.json", "ok", ""),
    ("57", "squadeval_pred_list", f"{B} squad-eval {SQUAD}/dev-v2.0.json data/pred_list.json", "error", r"pred_list.json: expected a JSON object"),
    ("58", "squadeval_pred_missing_v11", f"{B} squad-eval {SQUAD}/dev-v1.1.json data/pred_missing_v11.json", "warn", r'"exact_match": 77\.7388.*"f1": 83\.425'),
    ("59", "squadeval_pred_missing_v2", f"{B} squad-eval {SQUAD}/dev-v2.0.json data/pred_missing_v2.json", "warn", r"[Mm]issing"),
    ("60", "squadeval_pred_nonstring", f"{B} squad-eval {SQUAD}/dev-v2.0.json data/pred_nonstring.json", "error", r"pred_nonstring.json: the prediction for \S+ is not a string"),
    ("61", "squadeval_pred_onlyextra", f"{B} squad-eval {SQUAD}/dev-v2.0.json data/pred_onlyextra.json", "error", r"pred_onlyextra.json: no question"),
    ("62", "squadeval_pred_truncated", f"{B} squad-eval {SQUAD}/dev-v2.0.json data/pred_truncated.json", "error", r"pred_truncated.json:1: invalid JSON"),
    ("63", "squadft_answers_dict", f"{B} finetune squad {FT} --data data/sq_answers_dict --out out/s1", "error", r"train-v1.1.json: question \S+: field 'answers' should be list"),
    ("64", "squadft_context_null", f"{B} finetune squad {FT} --data data/sq_context_null --out out/s2", "error", r"train-v1.1.json: article 0 paragraph 0: field 'context'"),
    ("65", "squadft_question_int", f"{B} finetune squad {FT} --data data/sq_question_int --out out/s3", "error", r"field 'question' should be str"),
    ("66", "squadft_start_neg", f"{B} finetune squad {FT} --data data/sq_start_neg --out out/s4", "error", r"is not at answer_start -5"),
    ("67", "squadft_start_oob", f"{B} finetune squad {FT} --data data/sq_start_oob --out out/s5", "error", r"is not at answer_start 1000000"),
    ("68", "squadft_start_str", f"{B} finetune squad {FT} --data data/sq_start_str --out out/s6", "error", r"field 'answer_start' should be int"),
    ("69", "squadft_trunc", f"{B} finetune squad {FT} --data data/sq_trunc --out out/s7", "error", r"train-v1.1.json:1: invalid JSON"),
    ("70", "toktrain_empty", f"{B} tokenizer train --corpus data/empty.txt --vocab-size 100 --output out/v_empty.txt", "error", r"empty.txt: the corpus holds no words"),
    ("71", "toktrain_garbage", f"{B} tokenizer train --corpus data/garbage.bin --vocab-size 100 --output out/v_g.txt", "error", r"garbage.bin:1: not valid UTF-8"),
    ("72", "toktrain_latin1", f"{B} tokenizer train --corpus data/latin1.txt --vocab-size 100 --output out/v_l.txt", "error", r"latin1.txt:1: not valid UTF-8"),
    ("73", "tsv_empty", f"{B} finetune text-classification {FT} --data data/tsv_empty --out out/t1", "error", r"train.tsv: no examples"),
    ("74", "tsv_fewcols", f"{B} finetune text-classification {FT} --data data/tsv_fewcols --out out/t2", "error", r"train.tsv:8: expected 2 fields"),
    ("75", "tsv_garbage", f"{B} finetune text-classification {FT} --data data/tsv_garbage --out out/t3", "error", r"train.tsv:\d+: not valid UTF-8"),
    ("76", "tsv_headeronly", f"{B} finetune text-classification {FT} --data data/tsv_headeronly --out out/t4", "error", r"train.tsv: no examples"),
    ("77", "tsv_latin1", f"{B} finetune text-classification {FT} --data data/tsv_latin1 --out out/t5", "error", r"train.tsv:6: not valid UTF-8"),
    ("78", "tsv_missinglabel", f"{B} finetune text-classification {FT} --data data/tsv_missinglabel --out out/t6", "error", r"train.tsv:9: empty label"),
    ("80", "tsv_unknownlabel_dev", f"{B} finetune text-classification {FT} --data data/tsv_unknownlabel_dev --out out/t7", "error", r"dev.tsv:22: unknown label 'neutral'"),
    ("81", "tsv_wrongcols", f"{B} finetune text-classification {FT} --data data/tsv_wrongcols --out out/t8", "error", r"train.tsv:8: expected 2 fields"),
    ("87", "vocab_blanklines_tokenize", f"{B} tokenize --vocab data/vocab_blanklines.txt 'the fox'", "error", r"vocab_blanklines.txt:7: empty token"),
    ("88", "vocab_dup_ptdata", f"{B} pretrain-data --input data/onedoc.txt --vocab data/vocab_dup.txt --output out/pd_vdup --quiet", "error", r"vocab_dup.txt:30523: duplicate token"),
    ("90", "vocab_empty_tokenize", f"{B} tokenize --vocab data/vocab_empty.txt 'the fox'", "error", r"vocab_empty.txt: the vocabulary is empty"),
    ("91", "vocab_latin1_tokenize", f"{B} tokenize --vocab data/vocab_latin1.txt 'the fox'", "error", r"vocab_latin1.txt:51: not valid UTF-8"),
    ("92", "vocab_mismatch_pretrain", f"{B} pretrain --data base/kjv-data64 --vocab data/vocab_small.txt --out out/pt_vmis --steps 2 --no-progress", "error", r"the vocabulary has 5000 tokens but the data was made with 30522"),
    ("93", "vocab_nocls_tokenize", f"{B} tokenize --vocab data/vocab_nocls.txt 'the fox'", "error", r"vocab_nocls.txt: vocabulary lacks the special tokens \[CLS\]"),
    ("94", "vocab_nounk_pretrain", f"{B} pretrain --data base/kjv-data64 --vocab data/vocab_nounk.txt --out out/pt_vnounk --steps 2 --no-progress", "error", r"vocab_nounk.txt: vocabulary lacks the special tokens \[UNK\]"),
    ("96", "vocab_samecontent_othername", f"{B} pretrain {PT.replace(str(BASE_VOCAB), 'data/vocab_copy.txt')} --out out/pt_vcopy --steps 2", "ok", ""),
    ("97", "vocab_shuffled_pretrain", f"{B} pretrain {PT.replace(str(BASE_VOCAB), 'data/vocab_shuffled.txt')} --out out/pt_vshuf --steps 2", "error", r"vocab_shuffled.txt: not the vocabulary the data was made with"),
    ("98", "bin_evil_rawpickle_convert", f"{B} convert models/bin_evil_rawpickle out/conv_evil1; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"pytorch_model.bin: not loaded, for safety"),
    ("99", "bin_evil_rawpickle_fillmask", f"{B} fill-mask models/bin_evil_rawpickle {FM}; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"not loaded, for safety"),
    ("100", "bin_evil_rawpickle_finetune", f"{B} finetune text-classification --model models/bin_evil_rawpickle --data data/tsv_ok --out out/ft_evil --epochs 1 --no-progress; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"not loaded, for safety"),
    ("101", "bin_evil_rawpickle_info", f"{B} info models/bin_evil_rawpickle", "ok", ""),
    ("102", "bin_evil_rawpickle_initfrom", f"{B} pretrain --data base/kjv-data64 --init-from models/bin_evil_rawpickle --out out/pt_evil --steps 2 --no-progress; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"not loaded, for safety"),
    ("103", "bin_evil_torchsave_convert", f"{B} convert models/bin_evil_torchsave out/conv_evil2; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"not loaded, for safety"),
    ("104", "bin_evil_torchsave_fillmask", f"{B} fill-mask models/bin_evil_torchsave {FM}; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"not loaded, for safety"),
    ("108", "model_cfg_act_unknown_fillmask", f"{B} fill-mask models/cfg_act_unknown {FM}", "error", r"config.json: invalid BERT config \(unsupported hidden_act 'swishy'"),
    ("109", "model_cfg_dropout_bad_fillmask", f"{B} fill-mask models/cfg_dropout_bad {FM}", "error", r"config.json: invalid BERT config \(hidden_dropout_prob must be"),
    ("110", "model_cfg_empty_fillmask", f"{B} fill-mask models/cfg_empty {FM}", "error", r"config.json: not a readable JSON config"),
    ("111", "model_cfg_heads_indivisible_fillmask", f"{B} fill-mask models/cfg_heads_indivisible {FM}", "error", r"not a multiple of num_attention_heads 3"),
    ("112", "model_cfg_list_fillmask", f"{B} fill-mask models/cfg_list {FM}", "error", r"config.json: a config.json must hold a JSON object"),
    ("115", "model_cfg_more_layers_fillmask", f"{B} fill-mask models/cfg_more_layers {FM}", "warn", r"freshly initialised"),
    ("116", "model_cfg_neg_layers_fillmask", f"{B} fill-mask models/cfg_neg_layers {FM}", "error", r"config.json: invalid BERT config \(num_hidden_layers must be at least 0, got -1"),
    ("117", "model_cfg_notjson_fillmask", f"{B} fill-mask models/cfg_notjson {FM}", "error", r"config.json: not a readable JSON config"),
    ("118", "model_cfg_string_hidden_fillmask", f"{B} fill-mask models/cfg_string_hidden {FM}", "error", r"config.json: invalid BERT config \(hidden_size must be an integer, got '128'"),
    ("120", "model_cfg_vocab_mismatch_fillmask", f"{B} fill-mask models/cfg_vocab_mismatch {FM}", "error", r"word_embeddings.weight has shape"),
    ("121", "model_cfg_zero_layers_fillmask", f"{B} fill-mask models/cfg_zero_layers {FM}", "warn", r"not used"),
    ("122", "model_empty_dir_fillmask", f"{B} fill-mask models/empty_dir {FM}", "error", r"empty_dir: not a BERT model directory"),
    ("123", "model_st_empty_fillmask", f"{B} fill-mask models/st_empty {FM}", "error", r"st_empty/model.safetensors: unreadable"),
    ("124", "model_st_float64_fillmask", f"{B} fill-mask models/st_float64 {FM}", "ok", ""),
    ("125", "model_st_garbage_fillmask", f"{B} fill-mask models/st_garbage {FM}", "error", r"st_garbage/model.safetensors: unreadable"),
    ("126", "model_st_header_only_fillmask", f"{B} fill-mask models/st_header_only {FM}", "error", r"st_header_only/model.safetensors: unreadable"),
    ("127", "model_st_missing_emb_fillmask", f"{B} fill-mask models/st_missing_emb {FM}", "warn", r"freshly initialised"),
    ("128", "model_st_nan_fillmask", f"{B} fill-mask models/st_nan {FM}", "error", r"st_nan: \d+ tensor\(s\) hold NaN or infinite values"),
    ("129", "model_st_truncated_fillmask", f"{B} fill-mask models/st_truncated {FM}", "error", r"st_truncated/model.safetensors: unreadable"),
    ("130", "model_st_wrongshape_fillmask", f"{B} fill-mask models/st_wrongshape {FM}", "error", r"query.weight has shape \(64, 128\)"),
    ("9", "model_bin_ok_fillmask", f"{B} fill-mask models/bin_ok {FM}", "ok", ""),
    ("136", "seqlen_finetune_1024", f"{B} finetune text-classification --model {TINY} --data data/tsv_ok --out out/ft_seq1024 --epochs 1 --max-seq-length 1024 --no-progress", "error", r"--max-seq-length: must be <= 512"),
    ("137", "seqlen_finetune_1024_longtext", f"{B} finetune text-classification --model {TINY} --data data/tsv_long --out out/ft_seq1024l --epochs 1 --batch-size 4 --max-seq-length 1024 --no-progress", "error", r"--max-seq-length: must be <= 512"),
    ("141", "task_mismatch_evaluate", f"{B} evaluate conll2003 --model out/ft_sst2_base --data data/conll_ok --no-progress", "error", r"its head has 2 output"),
    ("142", "task_mismatch_labels", f"{B} evaluate cola --model out/ft_sst2_base --data {GLUE}/CoLA --batch-size 256 --no-progress", "warn", r"was fine-tuned on sst2, not cola"),
    ("143", "task_mismatch_predict", f"{B} predict rte --model out/ft_sst2_base --input data/pred_blank.jsonl --output out/p_mis.jsonl", "error", r"task rte has labels"),
    ("144", "opt_ft_batch0", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o1 --batch-size 0", "error", r"argument --batch-size: must be >= 1 \(got 0\)"),
    ("145", "opt_ft_batchneg", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o2 --batch-size -8", "error", r"argument --batch-size: must be >= 1 \(got -8\)"),
    ("146", "opt_ft_epochs0", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o3 --epochs 0", "error", r"argument --epochs: must be >= 1"),
    ("147", "opt_ft_evalbatch0", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o4 --eval-batch-size 0", "error", r"argument --eval-batch-size: must be >= 1"),
    ("149", "opt_ft_lrneg", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o5 --lr -2e-5", "error", r"argument --lr: must be >= 0"),
    ("150", "opt_ft_maxtrain0", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o6 --max-train-examples 0", "error", r"argument --max-train-examples: must be >= 1"),
    ("153", "opt_ft_warmup2", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o7 --warmup 2", "error", r"argument --warmup: must be in \[0, 1\)"),
    ("156", "opt_pt_dropout2", f"{B} pretrain {PT} --out out/o8 --steps 5 --dropout 2", "error", r"argument --dropout: must be"),
    ("160", "opt_pt_lr_huge", f"{B} pretrain {PT} --out out/o9 --steps 12 --lr 1e6 --log-every 2", "error", r"training diverged at step \d+"),
    ("161", "opt_pt_lrneg", f"{B} pretrain {PT} --out out/o10 --steps 5 --lr -1e-4", "error", r"argument --lr: must be >= 0|learning rate"),
    ("162", "opt_pt_lrneg_eq", f"{B} pretrain {PT} --out out/o11 --steps 5 --lr=-1e-4", "error", r"argument --lr: must be >= 0|learning rate"),
    ("170", "tok_maxlen_1", f"{B} tokenize --vocab {BASE_VOCAB} --max-length 1 'hello world' --pair second", "error", r"max_length=1 leaves no room|argument --max-length"),
    ("171", "toktrain_vocabsize0", f"{B} tokenizer train --corpus data/onedoc.txt --vocab-size 0 --output out/v0.txt", "error", r"vocab_size must exceed|argument --vocab-size"),
    ("172", "toktrain_vocabsize3", f"{B} tokenizer train --corpus data/onedoc.txt --vocab-size 3 --output out/v3.txt", "error", r"vocab_size must exceed|argument --vocab-size"),
    ("173", "path_fillmask_nomodel", f"{B} fill-mask nonexistent/model a [MASK] .", "error", r"nonexistent/model: no such model directory"),
    ("175", "path_ft_nodata", f"{B} finetune sst2 --model {TINY} --data nonexistent/glue --out out/x1 --no-progress", "error", r"nonexistent/glue"),
    ("178", "path_plot_norun", f"{B} plot nonexistent/run", "error", r"nonexistent/run/log.jsonl: no such log"),
    ("181", "path_pt_novocab", f"{B} pretrain --data base/kjv-data64 --vocab nonexistent/vocab.txt --out out/x2 --steps 5 --no-progress", "error", r"nonexistent/vocab.txt: no such file"),
    ("185", "predict_outdir_under_file", f"{B} predict sst2 --model out/ft_sst2_base --input data/pred_blank.jsonl --output /etc/passwd/p.jsonl", "error", r"/etc/passwd/p.jsonl: cannot create the --output: /etc/passwd is a file"),
    ("186", "squadeval_outfile_bad", f"{B} squad-eval data/squad_small.json {SQUAD}/bert-predictions-dev-v1.1.json --out-file /etc/passwd/metrics.json", "error", r"/etc/passwd/metrics.json: cannot create"),
    ("187", "unwritable_convert", f"{B} convert models/ok /etc/passwd/out", "error", r"/etc/passwd/out: cannot create"),
    ("188", "unwritable_embed", f"{B} embed models/ok --input data/onedoc.txt --output /etc/passwd/x.npy", "error", r"/etc/passwd/x.npy: cannot create"),
    ("189", "unwritable_evaluate", f"{B} evaluate text-classification --model out/ft_tsv_ok --data data/tsv_ok --output /etc/passwd/m.json --no-progress", "error", r"/etc/passwd/m.json: cannot create"),
    ("190", "unwritable_finetune", f"{B} finetune text-classification {FT} --data data/tsv_ok --out /etc/passwd/out", "error", r"/etc/passwd/out: cannot create"),
    ("191", "unwritable_plot", f"{B} plot base/probe --out /etc/passwd/c.png", "error", r"/etc/passwd/c.png: cannot create"),
    ("192", "unwritable_pretrain", f"{B} pretrain {PT} --out /etc/passwd/out --steps 5", "error", r"/etc/passwd/out: cannot create"),
    ("194", "unwritable_ptdata", f"{B} pretrain-data --input {KJV} --vocab {BASE_VOCAB} --output /etc/passwd/out --quiet", "error", r"/etc/passwd/out: cannot create"),
    ("195", "unwritable_toktrain", f"{B} tokenizer train --corpus data/onedoc.txt --vocab-size 50 --output /etc/passwd/vocab.txt", "error", r"/etc/passwd/vocab.txt: cannot create"),
    ("202", "plot_partial_log_line", f"cp -r base/probe out/probe_torn && printf '{{\"step\": 99, \"lo' >> out/probe_torn/log.jsonl && {B} plot out/probe_torn", "ok", r"curves.png"),
    ("207", "resume_partial_log_line", f"cp -r base/probe out/probe_torn2 && printf '{{\"step\": 99, \"lo' >> out/probe_torn2/log.jsonl && {B} pretrain --data base/kjv-data64 --vocab {BASE_VOCAB} --model-size tiny --steps 10 --batch-size 8 --save-every 5 --log-every 5 --no-progress --out out/probe_torn2 --resume", "ok", r"event=export"),
    ("203", "ptdata_workers_kill_child",
     f"{B} pretrain-data --input {SHARED}/corpus/linux-docs.txt --vocab {BASE_VOCAB} --output out/pd_kill --workers 2 --chunk-sentences 5000 --quiet & P=$!; "
     "for i in $(seq 100); do C=$(pgrep -P $P | head -1); [ -n \"$C\" ] && break; sleep 0.2; done; sleep 2; kill -9 $C; wait $P", "error", r"worker process died"),
    ("F7/F9/F11", "finetune_kill_resume",
     f"A='finetune text-classification --model {TINY} --data data/tsv_ok --out out/ftk --epochs 6 --batch-size 8 --max-seq-length 32 --no-progress'; "
     f"{B} $A & P=$!; for i in $(seq 600); do [ -e out/ftk/.resume.pt ] && break; sleep 0.1; done; kill -9 $P; wait $P; "
     f"{B} evaluate text-classification --model out/ftk --data data/tsv_ok --no-progress 2>&1 | grep -m1 'unfinished fine-tuning run'; "
     f"{B} $A 2>&1 | tail -1; {B} $A --resume | tail -1; test -e out/ftk/results.json && test ! -e out/ftk/.unfinished.json && echo finished", "ok", r"unfinished fine-tuning run.*pass --resume.*finished"),
    ("F9", "finetune_into_finished_out", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/ft_tsv_ok --lr 5e-5", "error", r"out/ft_tsv_ok already holds a fine-tuned model: pass --overwrite"),
]

RUN10 = f"--data base/kjv-data64 --vocab {BASE_VOCAB} --model-size tiny --steps 10 --batch-size 8 --save-every 5 --log-every 5 --no-progress"
LONG = "the [MASK] went to the store . " * 150
LONGWORD = "x" * 150
CASES += [
    ("46", "ptdata_workers_latin1_late", f"{B} pretrain-data --input data/kjv_latin1_tail.txt --vocab {BASE_VOCAB} --output out/pd_w_l1 --workers 2 --chunk-sentences 2000 --quiet", "error", r"kjv_latin1_tail.txt:\d+: not valid UTF-8"),
    ("79", "tsv_quote", f"{B} finetune text-classification {FT} --data data/tsv_quote --out out/t_quote", "ok", ""),
    ("82", "tok_control", f"{B} tokenize --vocab {BASE_VOCAB} $'ab\\001c\\ad\\te\\rf\\Eg' --json", "ok", ""),
    ("83", "tok_emoji", f"{B} tokenize --vocab {BASE_VOCAB} 'I love it 😀🎉 done'", "ok", ""),
    ("84", "tok_empty_text", f"{B} tokenize --vocab {BASE_VOCAB} ''", "ok", ""),
    ("85", "tok_korean", f"{B} tokenize --vocab {BASE_VOCAB} '안녕하세요 세계'", "ok", ""),
    ("86", "tok_longword", f"{B} tokenize --vocab {BASE_VOCAB} 'short {LONGWORD}'", "ok", ""),
    ("89", "vocab_dup_tokenize", f"{B} tokenize --vocab data/vocab_dup.txt 'the fox'", "error", r"vocab_dup.txt:30523: duplicate token"),
    ("95", "vocab_nounk_tokenize", f"{B} tokenize --vocab data/vocab_nounk.txt 'the fox'", "error", r"vocab_nounk.txt: vocabulary lacks the special tokens \[UNK\]"),
    ("105", "bin_evil_torchsave_finetune", f"{B} finetune text-classification --model models/bin_evil_torchsave --data data/tsv_ok --out out/ft_evil2 --epochs 1 --no-progress; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"not loaded, for safety"),
    ("106", "bin_evil_torchsave_info", f"{B} info models/bin_evil_torchsave", "ok", ""),
    ("107", "bin_evil_torchsave_initfrom", f"{B} pretrain --data base/kjv-data64 --init-from models/bin_evil_torchsave --out out/pt_evil2 --steps 2 --no-progress; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"not loaded, for safety"),
    ("113", "model_cfg_missing_hidden_fillmask", f"{B} fill-mask models/cfg_missing_hidden {FM}", "error", r"cfg_missing_hidden: tensor \S+ has shape"),
    # here the default vocab_size (30522) is the model's: a missing field is no error
    ("114", "model_cfg_missing_vocab_fillmask", f"{B} fill-mask models/cfg_missing_vocab {FM}", "ok", ""),
    ("119", "model_cfg_type_vocab0_fillmask", f"{B} fill-mask models/cfg_type_vocab0 {FM}", "error", r"token_type_embeddings.weight has shape"),
    ("131", "resume_malicious_ckpt", f"cp -r base/probe out/res131 && cp models/bin_evil_torchsave/pytorch_model.bin out/res131/checkpoints/step-00000011.pt && {B} pretrain {RUN10.replace('--steps 10', '--steps 20')} --out out/res131 --resume; R=$?; test -e PWNED && echo CODE-RAN-PWNED && exit 99; exit $R", "error", r"step-00000011.pt: not loaded, for safety"),
    ("132", "seqlen_embed_long", f"{B} embed {TINY} --input data/tsv_long/train.tsv --text-column text --output out/emb_long.npy --max-length 1024", "warn", r"truncated"),
    ("133", "seqlen_fillmask_long_default", f"{B} fill-mask {TINY} '{LONG}' --top-k 1", "warn", r"truncated"),
    ("134", "seqlen_fillmask_long_error", f"{B} fill-mask {TINY} '{LONG}' --top-k 1 --on-overflow error", "error", r"input 1 has \d+ tokens, more than the limit of 512"),
    ("135", "seqlen_fillmask_maxlen1000", f"{B} fill-mask {TINY} '{LONG}' --top-k 1 --max-length 1000", "warn", r"truncated"),
    ("138", "seqlen_pretrain_1024_initfrom", f"{B} pretrain-data --input {KJV} --vocab {BASE_VOCAB} --output out/d1024a --max-seq-length 1024 --max-predictions-per-seq 150 --dupe-factor 1 --quiet >/dev/null && {B} pretrain --data out/d1024a --init-from models/ok --out out/pt1024a --steps 3 --batch-size 2 --no-progress", "error", r"sequences of 1024 tokens but the model only 512"),
    ("139", "seqlen_pretrain_1024_tiny", f"{B} pretrain-data --input {KJV} --vocab {BASE_VOCAB} --output out/d1024b --max-seq-length 1024 --max-predictions-per-seq 150 --dupe-factor 1 --quiet >/dev/null && {B} pretrain --data out/d1024b --vocab {BASE_VOCAB} --out out/pt1024b --model-size tiny --steps 3 --batch-size 2 --no-progress", "error", r"sequences of 1024 tokens but the model only 512"),
    ("148", "opt_ft_grid_bad", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o12 --grid lr=abc", "error", r"bad grid entry 'lr=abc'"),
    ("151", "opt_ft_taskopt_bad", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o13 -o nonsense=1", "error", r"unknown option\(s\) nonsense"),
    ("152", "opt_ft_threads0", f"{B} finetune text-classification {FT} --data data/tsv_ok --out out/o14 --threads 0", "ok", ""),
    ("154", "opt_pt_batch0", f"{B} pretrain {PT} --out out/o15 --steps 5 --batch-size 0", "error", r"(batch_size|argument --batch-size:) must be >= 1"),
    ("155", "opt_pt_batchneg", f"{B} pretrain {PT} --out out/o16 --steps 5 --batch-size -4", "error", r"(batch_size|argument --batch-size:) must be >= 1"),
    ("157", "opt_pt_gradaccum0", f"{B} pretrain {PT} --out out/o17 --steps 5 --grad-accum 0", "error", r"(grad_accum|argument --grad-accum:) must be >= 1"),
    ("158", "opt_pt_keep0", f"{B} pretrain {PT} --out out/o18 --steps 5 --save-every 2 --keep 0", "error", r"(keep|argument --keep:) must be >= 1"),
    ("159", "opt_pt_logevery0", f"{B} pretrain {PT} --out out/o19 --steps 5 --log-every 0", "error", r"(log_every|argument --log-every:) must be >= 1"),
    ("163", "opt_pt_saveevery0", f"{B} pretrain {PT} --out out/o20 --steps 5 --save-every 0", "error", r"(save_every|argument --save-every:) must be >= 1"),
    ("164", "opt_pt_steps0", f"{B} pretrain {PT} --out out/o21 --steps 0", "error", r"(steps|argument --steps:) must be >= 1"),
    ("165", "opt_pt_stepsneg", f"{B} pretrain {PT} --out out/o22 --steps -3", "error", r"(steps|argument --steps:) must be >= 1"),
    ("166", "opt_pt_warmup_gt_steps", f"{B} pretrain {PT} --out out/o23 --steps 5 --warmup-steps 100", "error", r"warmup_steps must lie in"),
    ("167", "seqlen_finetune_3", f"{B} finetune text-classification --model {TINY} --data data/tsv_ok --out out/ft_seq3 --epochs 1 --max-seq-length 3 --no-progress", "warn", r"were truncated"),
    ("168", "seqlen_finetune_pair_3", f"{B} finetune rte --model {TINY} --data {GLUE}/RTE --out out/ft_rte3 --epochs 1 --max-seq-length 3 --max-train-examples 50 --no-progress", "warn", r"were truncated"),
    ("169", "seqlen_pretrain_data_3", f"{B} pretrain-data --input {KJV} --vocab {BASE_VOCAB} --output out/d3 --max-seq-length 3 --quiet", "error", r"max_seq_length must be at least 5|argument --max-seq-length: must be >= 5"),
    ("174", "path_ft_model_is_file", f"{B} finetune sst2 --model {BASE_VOCAB} --data {GLUE}/SST-2 --out out/x3 --no-progress", "error", r"not a model directory \(no config.json\)"),
    ("176", "path_ft_nomodel", f"{B} finetune sst2 --model nonexistent/model --data {GLUE}/SST-2 --out out/x4 --no-progress", "error", r"nonexistent/model: not a model directory"),
    ("177", "path_info_nomodel", f"{B} info nonexistent", "error", r"nonexistent: no such model directory"),
    ("179", "path_pt_data_is_file", f"{B} pretrain --data {BASE_VOCAB} --vocab {BASE_VOCAB} --out out/x5 --steps 5 --no-progress", "error", r"no meta.json"),
    ("180", "path_pt_nodata", f"{B} pretrain --data nonexistent/dir --vocab {BASE_VOCAB} --out out/x6 --steps 5 --no-progress", "error", r"nonexistent/dir: no meta.json"),
    ("182", "path_ptdata_noinput", f"{B} pretrain-data --input nonexistent.txt --vocab {BASE_VOCAB} --output out/x7 --quiet", "error", r"nonexistent.txt: no such file"),
    ("183", "path_squadeval_nofile", f"{B} squad-eval nonexistent.json nonexistent2.json", "error", r"nonexistent.json: no such file"),
    ("184", "path_tokenize_dir_as_vocab", f"{B} tokenize --vocab data hello", "error", r"data: no vocab.txt or tokenizer.json"),
    ("193", "unwritable_proc", f"{B} pretrain {PT} --out /proc/out --steps 5", "error", r"/proc/out"),
    ("204", "resume_diff_batch", f"cp -r base/probe out/res204 && {B} pretrain {RUN10.replace('--batch-size 8', '--batch-size 16')} --out out/res204 --resume", "error", r"step-00000010.pt: written with a global batch of 8, this run has 16"),
    ("205", "resume_diff_model", f"cp -r base/probe out/res205 && {B} pretrain {RUN10.replace('tiny', 'mini')} --out out/res205 --resume", "error", r"was written for a different model shape"),
    ("206", "resume_diff_steps", f"cp -r base/probe out/res206 && {B} pretrain {RUN10.replace('--steps 10', '--steps 20')} --out out/res206 --resume", "error", r"written by a run of 10 steps"),
    ("208", "resume_truncated_newest_ckpt", f"cp -r base/probe out/res208 && truncate -s 1000 out/res208/checkpoints/step-00000010.pt && {B} pretrain {RUN10} --out out/res208 --resume", "error", r"step-00000010.pt: unreadable checkpoint"),
    ("209", "resume_without_flag", f"cp -r base/probe out/res209 && {B} pretrain {RUN10} --out out/res209", "error", r"already holds checkpoints"),
    ("F3/F14", "pretrain_resume_removes_temp_files", f"cp -r base/probe out/resF3 && : > out/resF3/checkpoints/.step-00000011.pt.x1.tmp && : > out/resF3/model/.model.safetensors.x2.tmp && {B} pretrain {RUN10} --out out/resF3 --resume && ls -A out/resF3/checkpoints out/resF3/model | grep -c tmp; true", "ok", r"^0$|\n0\n"),
]

ROOT_CASES = [
    ("198", "diskfull_pretrain_2nd_ckpt", "mkdir -p FULL5 && mount -t tmpfs -o size=80m tmpfs FULL5 && "
     f"{B} pretrain {PT} --out FULL5/pt --steps 10 --save-every 2 --batch-size 8; R=$?; ls FULL5/pt/checkpoints >&2; umount FULL5; exit $R", "error", r"step-00000004.pt: no space left on device.*step-00000002.pt, is intact"),
    ("196", "diskfull_finetune", "mkdir -p FULL && mount -t tmpfs -o size=3m tmpfs FULL && "
     f"{B} finetune text-classification {FT} --data data/tsv_ok --out FULL/ft; R=$?; umount FULL; exit $R", "error", r"FULL/ft/.*no space left on device"),
    ("197", "diskfull_pretrain", "mkdir -p FULL2 && mount -t tmpfs -o size=12m tmpfs FULL2 && "
     f"{B} pretrain {PT} --out FULL2/pt --steps 6 --save-every 2 --batch-size 8; R=$?; ls FULL2/pt/checkpoints >&2; umount FULL2; exit $R", "error", r"no space left on device \(the disk is full\) while writing this checkpoint"),
    ("200", "diskfull_ptdata", "mkdir -p FULL3 && mount -t tmpfs -o size=1m tmpfs FULL3 && "
     f"{B} pretrain-data --input {KJV} --vocab {BASE_VOCAB} --output FULL3/pd --max-seq-length 64 --dupe-factor 1 --quiet; R=$?; umount FULL3; exit $R", "error", r"no space left on device"),
    ("201", "diskfull_squadeval_out", "mkdir -p FULL4 && mount -t tmpfs -o size=64k tmpfs FULL4 && head -c 100000 /dev/zero > FULL4/filler 2>/dev/null; "
     f"{B} squad-eval {SQUAD}/dev-v2.0.json {SQUAD}/bert-predictions-dev-v2.0.json --out-file FULL4/m.json; R=$?; umount FULL4; exit $R", "error", r"FULL4/m.json: no space left on device"),
]


def verdict(kind: str, expect: str, code, out: str, err: str) -> str:
    text = out + err
    if code is None:
        return "HANG"
    if code < 0 or code in (134, 139):
        return "CRASH"
    if "CODE-RAN-PWNED" in text:
        return "CODE RAN"
    if "Traceback (most recent call last)" in text:
        return "TRACEBACK"
    matched = bool(re.search(expect, text, re.S)) if expect else True
    if kind == "error":
        if code == 0:
            return "SILENT WRONG"
        return "CLEAR ERROR" if matched and re.search(r"bertkit[\w -]*: error:", err) else "UNCLEAR ERROR"
    if code != 0 or not matched:
        return "FAILED"
    return "WARNED" if kind == "warn" or "warning" in err else "OK"


def _line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    if not lines:
        return ""
    errors = [x for x in lines if x.startswith("bertkit: error:")]
    shown = (errors or lines)[-1]
    return (shown[:240] + "…") if len(shown) > 240 else shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scratch", nargs="?", default=str(Path(tempfile.gettempdir()) / "bertkit-robustness"))
    parser.add_argument("--only", default=None, help="comma-separated case names")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--table", action="store_true", help="print the table of an earlier run")
    args = parser.parse_args()
    s = Path(args.scratch)
    if args.table:
        print_table(json.loads((s / "results.json").read_text()))
        return
    s.mkdir(parents=True, exist_ok=True)
    for old in (s / "out").glob("*") if (s / "out").is_dir() else []:
        if old.name not in ("ft_sst2_base", "ft_tsv_ok"):  # made by make_base
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    make_fixtures(s)  # cheap; data files only
    if not (s / "models" / "bin_ok").exists():
        make_base(s)
    make_extra_models(s)
    cases = CASES + (ROOT_CASES if os.geteuid() == 0 else [])
    if args.only:
        keep = set(args.only.split(","))
        cases = [c for c in cases if c[1] in keep]

    def one(case):
        number, name, cmd, kind, expect = case
        code, out, err, seconds = run_case_command(cmd, s, timeout=300)
        result = {"number": number, "name": name, "command": cmd.replace(B, "bertkit").replace(str(SHARED), "$DATA"),
                  "exit": code, "verdict": verdict(kind, expect, code, out, err),
                  "shown": _line(err if code else out + "\n" + err), "seconds": round(seconds, 1)}
        print(f"{result['verdict']:13} {name} ({seconds:.0f} s)", file=sys.stderr, flush=True)
        return result

    os.environ.update(PYTHONPATH=str(ROOT / "src"), BERTKIT_DEBUG="")
    sys.path.insert(0, str(ROOT / "src"))
    import torch  # noqa: F401  (imported once, before the forks)

    import bertkit.cli.main  # noqa: F401

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, cases))
    old = {}
    if args.only and (s / "results.json").exists():
        old = {r["name"]: r for r in json.loads((s / "results.json").read_text())}
    old.update({r["name"]: r for r in results})
    (s / "results.json").write_text(json.dumps(list(old.values()), indent=1))
    print_table(list(old.values()))


def print_table(results: list[dict]) -> None:
    print("| # | case | command | exit | what the user sees now (last line) | verdict |")
    print("|---|---|---|---|---|---|")
    for r in results:
        cmd = r["command"].replace("|", "\\|")
        cmd = cmd if len(cmd) <= 160 else cmd[:160] + "…"
        shown = r["shown"].replace("|", "\\|")
        print(f"| {r['number']} | {r['name']} | `{cmd}` | {r['exit']} | {shown} | **{r['verdict']}** |")


if __name__ == "__main__":
    main()
