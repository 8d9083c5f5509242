"""Inference speed: bertkit vs Hugging Face ``BertModel`` (sdpa and eager), same weights.

Measures sequences/s of the bare encoder forward pass (``torch.inference_mode``, eval):

* fixed length: random token ids, ``--seq-len`` tokens, batch sizes ``--batch-sizes``;
* real variable-length text: SST-2 dev sentences from ``../shared/data`` (skipped when absent),
  batch ``--text-batch``. Hugging Face gets the usual file-order batches padded to their
  longest sentence; bertkit gets the batches its ``embed``/``fill-mask`` use (sorted by
  length). "bertkit (file order)" runs bertkit on the Hugging Face batches too, so the
  model speed and the batching gain can be told apart. "bertkit unpadded" is the same model
  with ``attention_impl="unpadded"`` (``bertkit.model.unpadded``: position-wise work on the
  real tokens only), on the sorted and on the file-order batches; ``--compile`` adds
  "bertkit compiled" (``torch.compile(dynamic=True)``, compiled before timing).

``--precision`` times the precision axis instead: a sequence classifier (random weights, the
same in every row) as bertkit fp32 / bf16 / INT8 as the engine runs each (its classifier
rows through ``head_logits``: the last layer at ``[CLS]`` alone where ``cls_pays`` says so,
fp32 everywhere and bf16 on the classes measured to agree; fp32 with
``pack_fp32``'s MKL-packed copy for few rows where the CPU class has one; "bertkit fp32 plain"
without it), bertkit fp32 / bf16 compiled (the engine's
``compile="on"`` route, :mod:`bertkit.inference.compiled`, compiled before timing), ONNX Runtime fp32 / INT8 (``export-onnx``),
Hugging Face fp32 / bf16 / INT8 (``BertForSequenceClassification``, sdpa; bf16 with its
weights stored in bf16, as ``bench/serve.py``'s ``hf bf16`` pipelines; INT8 through the same
PyTorch dynamic quantisation as bertkit's), OpenVINO fp32 / bf16 / INT8
(``bertkit.inference.openvino``: bertkit's ONNX graph; INT8 by NNCF post-training static
quantisation calibrated on 300 SST-2 *train* sentences; bf16 only where the CPU has it
natively) and CTranslate2 fp32 / INT8 (its Transformers converter; the classifier layer
applied in PyTorch to its pooled output), on the same workloads, with ratios to Hugging Face
fp32. OpenVINO and CTranslate2 are optional (``pip install bertkit[bench]``): without them,
or without SST-2 for the calibration, their rows are skipped with a note. With SST-2 present
the fixed-length batches are real dev text packed into rows of ``--seq-len`` tokens (static
INT8 is calibrated on text, and random ids would fall outside its activation ranges; the
speed of a shape does not depend on the ids). bertkit, ONNX Runtime, OpenVINO and
CTranslate2 get bertkit's length-sorted text batches, Hugging Face the file-order ones.
Every row's logits are checked against bertkit fp32 first (fp32 rows within 1e-3, the others
within 10% of the logits' range or 0.01, whichever is larger: random weights give logits
close together).

Each figure is the best of ``--rounds`` interleaved rounds (the CPU may be shared), each
round running at least ``--min-time`` seconds (and at least one batch). Every
implementation's output is checked against bertkit's before timing. glibc malloc is tuned to
keep freed memory (``bertkit.cpu.keep_freed_memory``, as ``bertkit.inference.load`` does on
the CPU) for every row alike; ``--default-malloc`` leaves it as it is.

    python bench/inference.py                      # base and mini, a few minutes on 2 cores
    python bench/inference.py --shapes mini --rounds 1 --min-time 0.5   # quick look
    python bench/inference.py --precision          # fp32 / bf16 / INT8 / ORT / HF / OpenVINO / CT2
"""

from __future__ import annotations

import argparse
import copy
import csv
import functools
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from bertkit.checkpoint import save_pretrained
from bertkit.config import BertConfig
from bertkit.inference import length_batches
from bertkit.model import BertForSequenceClassification, BertModel
from bertkit.modeldir.int8 import pack_fp32, prepare
from bertkit.precision import autocast

PRECISION_ROWS = ("bertkit fp32", "bertkit fp32 plain", "bertkit bf16", "bertkit int8", "bertkit int8 static", "bertkit fp32 compiled",
                  "bertkit bf16 compiled", "ort fp32", "ort int8", "hf fp32",
                  "hf bf16", "hf int8", "ov fp32", "ov bf16", "ov int8", "ct2 fp32", "ct2 int8")
CALIBRATION = 300  # SST-2 *train* sentences for OpenVINO's static INT8 (timing and checks use dev)
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="base,mini", help="comma-separated presets (default base,mini)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-sizes", default="8,32")
    p.add_argument("--text-batch", type=int, default=32)
    p.add_argument("--text-limit", type=int, default=0, help="SST-2 dev sentences to use (0 = all 872)")
    p.add_argument("--base-text-batches", type=int, default=4,
                   help="for base/large, time only this many batches of each workload, taken at an "
                        "even stride through its batch list (0 = all), to keep the run short")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best is kept")
    p.add_argument("--min-time", type=float, default=1.5, help="seconds per measurement (at least)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall: sequences per wall-clock second (default); cpu: per CPU-second of "
                        "this process (steadier when other work shares the CPU)")
    p.add_argument("--no-eager", action="store_true", help="skip Hugging Face eager attention")
    p.add_argument("--compile", action="store_true",
                   help="also time bertkit under torch.compile(dynamic=True)")
    p.add_argument("--precision", action="store_true",
                   help="time the precision axis (see above) instead of the encoder comparison")
    p.add_argument("--rows", default=",".join(PRECISION_ROWS),
                   help="with --precision: comma-separated rows to run (default all)")
    p.add_argument("--default-malloc", action="store_true",
                   help="leave glibc malloc as it is (default: keep freed memory, for every row)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    return p.parse_args(argv)


def load_hf(directory, implementation):
    import transformers

    model = transformers.BertModel.from_pretrained(
        directory, attn_implementation=implementation, local_files_only=True
    )
    return model.eval()


def run_batches(model, batches, hf: bool):
    with torch.inference_mode():
        for ids, types, mask in batches:
            if hf:
                model(input_ids=ids, token_type_ids=types, attention_mask=mask)
            else:
                model(ids, types, mask)


def measure(run, batches, min_time: float, clock=time.perf_counter) -> float:
    """Sequences per second of ``run(batches)`` repeated for at least ``min_time`` s."""
    sequences = sum(b[0].shape[0] for b in batches)
    done, start = 0, clock()
    while True:
        run(batches)
        done += sequences
        elapsed = clock() - start
        if elapsed >= min_time:
            return done / elapsed


def clock_of(args):
    return time.process_time if args.clock == "cpu" else time.perf_counter


def pad_batch(rows, pad_id=0):
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, torch.zeros_like(ids), mask


def stride_sample(batches, count: int):
    """``count`` batches at an even stride through ``batches`` (all when there are fewer)."""
    if count >= len(batches):
        return batches
    step = len(batches) / count
    return [batches[int(i * step + step / 2)] for i in range(count)]


def sst2_token_ids(limit: int, split: str = "dev"):
    """Token ids of SST-2 ``split`` sentences ([CLS] ... [SEP]), or None when the data is absent."""
    dev, vocab = DATA / "glue" / "SST-2" / f"{split}.tsv", DATA / "vocab" / "bert-base-uncased-vocab.txt"
    if not dev.exists() or not vocab.exists():
        return None
    from bertkit.tokenizer import BertTokenizer

    tok = BertTokenizer.from_file(vocab, lowercase=True)
    with open(dev, encoding="utf-8") as f:
        sentences = [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    if limit:
        sentences = sentences[:limit]
    return [e.input_ids for e in tok.encode_batch(sentences, max_length=128)]


def packed_batch(rows, size: int, width: int):
    """``size`` rows of exactly ``width`` tokens: ``[CLS]`` + the sentences of ``rows`` (their
    ``[CLS]``/``[SEP]`` stripped) run together, cut to fit + ``[SEP]``; real text at a fixed shape."""
    cls, sep = rows[0][0], rows[0][-1]
    stream = [t for r in rows for t in r[1:-1]]
    need = size * (width - 2)
    stream = (stream * (need // max(len(stream), 1) + 1))[:need]
    ids = torch.tensor([[cls, *stream[i * (width - 2) : (i + 1) * (width - 2)], sep] for i in range(size)])
    return ids, torch.zeros_like(ids), torch.ones_like(ids)


def text_workloads(rows, size: int, hidden: int, args):
    """SST-2 batches of ``size`` in file order and length-sorted (bertkit's), evenly thinned
    to ``--base-text-batches`` for base-sized models."""
    file_order = [pad_batch(rows[i : i + size]) for i in range(0, len(rows), size)]
    groups = length_batches([len(r) for r in rows], size, longest_first=True)
    by_length = [pad_batch([rows[i] for i in group]) for group in groups]
    if hidden >= 768 and args.base_text_batches:
        file_order, by_length = (stride_sample(b, args.base_text_batches) for b in (file_order, by_length))
    return file_order, by_length


def check_same_outputs(models, batch):
    ids, types, mask = batch
    with torch.inference_mode():
        ref = models["bertkit"](ids, types, mask).last_hidden_state
        for name, model in models.items():
            if name.startswith("hf"):
                out = model(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state
            elif name != "bertkit":  # a bertkit variant
                out = model(ids, types, mask).last_hidden_state
            else:
                continue
            diff = (out - ref)[mask.bool()].abs().max().item()
            if diff > 1e-3:
                raise SystemExit(f"{name} differs from bertkit by {diff:.2e}: not the same weights")


def best_of_rounds(timed: dict, args) -> dict[str, float]:
    """name -> best sequences/s of ``timed[name] = (run, batches)`` over ``--rounds`` rounds,
    the names taking turns (reversed every other round) so that a change of load falls on
    all alike."""
    best = dict.fromkeys(timed, 0.0)
    for round_ in range(args.rounds):
        order = list(timed) if round_ % 2 == 0 else list(reversed(list(timed)))
        for name in order:
            run, batches = timed[name]
            best[name] = max(best[name], measure(run, batches, args.min_time, clock_of(args)))
    return best


def compare(label, workloads, models, args, results):
    """Time each implementation on its workload, interleaved; print seq/s and ratios."""
    timed = {name: (functools.partial(run_batches, models[m], hf=m.startswith("hf")), batches)
             for name, (m, batches) in workloads.items()}
    best = best_of_rounds(timed, args)
    line = {"workload": label, "seq_per_s": best}
    for ref in ("hf sdpa", "hf eager"):
        if ref in best:
            line[f"bertkit / {ref}"] = best["bertkit"] / best[ref]
    results.append(line)
    parts = [f"{n} {v:8.1f}" for n, v in best.items()]
    ratios = [f"x{line[k]:.2f} vs {k.split(' / ')[1]}" for k in line if k.startswith("bertkit /")]
    print(f"  {label:<28} seq/s: " + " | ".join(parts) + "   bertkit " + ", ".join(ratios), flush=True)
    for name in best:  # the variants against their padded/eager twin and Hugging Face
        twin = {"bertkit unpadded": "bertkit", "bertkit compiled": "bertkit",
                "bertkit unpadded (file order)": "bertkit (file order)"}.get(name)
        if twin in best:
            line[f"{name} / {twin}"] = best[name] / best[twin]
            ref = f" x{best[name] / best['hf sdpa']:.2f} vs hf sdpa" if "hf sdpa" in best else ""
            print(f"    {name}: x{best[name] / best[twin]:.2f} vs {twin},{ref}", flush=True)


def bench_shape(shape: str, args, results, text_ids):
    config = BertConfig.preset(shape)
    torch.manual_seed(0)
    ours = BertModel(config).eval()
    models = {"bertkit": ours}
    variants = {"bertkit unpadded": BertModel(BertConfig.preset(shape, attention_impl="unpadded"))}
    variants["bertkit unpadded"].load_state_dict(ours.state_dict())
    variants["bertkit unpadded"].eval()
    if args.compile:
        variants["bertkit compiled"] = torch.compile(ours, dynamic=True)
    with tempfile.TemporaryDirectory() as tmp:
        save_pretrained(ours, tmp)
        models["hf sdpa"] = load_hf(tmp, "sdpa")
        if not args.no_eager:
            models["hf eager"] = load_hf(tmp, "eager")
    print(f"{shape}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"{config.num_attention_heads} heads", flush=True)

    g = torch.Generator().manual_seed(1)
    for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
        ids = torch.randint(1000, config.vocab_size, (batch_size, args.seq_len), generator=g)
        batch = (ids, torch.zeros_like(ids), torch.ones_like(ids))
        check_same_outputs(models, batch)
        workloads = {name: (name, [batch]) for name in models}
        compare(f"fixed seq {args.seq_len} batch {batch_size}", workloads, models, args, results)

    if text_ids is None:
        print("  (SST-2 dev not found under ../shared/data: variable-length text skipped)")
        return
    rows, size = text_ids, args.text_batch
    all_file_order, all_by_length = text_workloads(rows, size, 0, args)
    padded = sum(b[0].numel() for b in all_file_order)
    sorted_tokens = sum(b[0].numel() for b in all_by_length)
    real = sum(len(r) for r in rows)
    print(f"  SST-2 dev: {len(rows)} sentences, {real} tokens; padded tokens: file order {padded}, "
          f"by length {sorted_tokens}", flush=True)
    file_order, by_length = text_workloads(rows, size, config.hidden_size, args)
    check_same_outputs(models, file_order[0])
    if len(by_length) < len(all_by_length):
        print(f"  (timing {len(by_length)} of each workload's batches, evenly spread)", flush=True)
    workloads = {"bertkit": ("bertkit", by_length), "bertkit (file order)": ("bertkit", file_order)}
    workloads.update({name: (name, file_order) for name in models if name.startswith("hf")})
    models.update(variants)
    check_same_outputs({"bertkit": ours, **variants}, file_order[0])
    workloads["bertkit unpadded"] = ("bertkit unpadded", by_length)
    workloads["bertkit unpadded (file order)"] = ("bertkit unpadded", file_order)
    if "bertkit compiled" in variants:
        run_batches(variants["bertkit compiled"], by_length, hf=False)  # compile before timing
        workloads["bertkit compiled"] = ("bertkit compiled", by_length)
    compare(f"SST-2 dev batch {size}", workloads, models, args, results)


# ----------------------------------------------------------------- the precision axis
def openvino_runners(directory, names, tmp, calibration):
    """The ``ov *`` rows of ``names``: bertkit's ONNX graph under OpenVINO (INT8: NNCF static
    quantisation calibrated on ``calibration``, token-id rows of real text)."""
    wanted = [n for n in names if n.startswith("ov ")]
    if not wanted:
        return {}
    try:
        from bertkit.inference import openvino as bov
        bov.require_openvino()
    except Exception as e:  # noqa: BLE001  (an optional engine: any import failure skips it)
        print(f"  (OpenVINO rows skipped: {e}; pip install 'bertkit[bench]')", flush=True)
        return {}
    if "ov int8" in wanted:
        try:
            import nncf  # noqa: F401  (INT8 only: the float rows run without it)
        except Exception as e:  # noqa: BLE001
            print(f"  (ov int8 skipped: {e}; pip install 'bertkit[bench]')", flush=True)
            wanted.remove("ov int8")
    runners = {}
    float_xml = bov.convert(directory, Path(tmp) / "ov")
    for name in wanted:
        precision = name.split()[1]
        if precision == "bf16" and not bov.native_bf16():
            print("  (ov bf16 skipped: OpenVINO runs bf16 only on a CPU with native bf16, and this one "
                  "has none: it would run fp32)", flush=True)
            continue
        if precision == "int8":
            if calibration is None:
                print("  (ov int8 skipped: no SST-2 train text to calibrate on)", flush=True)
                continue
            xml = bov.convert(directory, Path(tmp) / "ovq", int8=True,
                              calibration=bov.calibration_batches(calibration))
        else:
            xml = float_xml
        ov_model = bov.OvModel(xml, precision, threads=torch.get_num_threads())
        runners[name] = lambda ids, types, mask, m=ov_model: m(ids, types, mask).logits
    return runners


def ctranslate2_runners(model, directory, names, tmp):
    """The ``ct2 *`` rows of ``names``: CTranslate2's encoder (from its Transformers converter)
    + bertkit's classifier layer on its pooled output."""
    wanted = [n for n in names if n.startswith("ct2 ")]
    if not wanted:
        return {}
    try:
        import ctranslate2
    except ImportError as e:
        print(f"  (CTranslate2 rows skipped: {e}; pip install 'bertkit[bench]')", flush=True)
        return {}
    import numpy as np

    source = Path(tmp) / "ct2-source"  # a copy with what its converter reads beyond bertkit's files
    shutil.copytree(directory, source)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # it wants a tokenizer (ids are fed)
    vocab += [f"t{i}" for i in range(model.config.vocab_size - len(vocab))]
    (source / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config.setdefault("position_embedding_type", "absolute")  # transformers 5 dropped the key
    (source / "config.json").write_text(json.dumps(config), encoding="utf-8")
    out = Path(tmp) / "ct2"
    ctranslate2.converters.TransformersConverter(str(source)).convert(str(out), force=True)
    runners = {}
    for name in wanted:
        compute = {"fp32": "float32", "int8": "int8_float32"}[name.split()[1]]
        encoder = ctranslate2.Encoder(str(out), device="cpu", compute_type=compute,
                                      intra_threads=torch.get_num_threads())

        def run(ids, types, mask, enc=encoder):
            lengths = ctranslate2.StorageView.from_array(mask.sum(1).numpy().astype(np.int32))
            result = enc.forward_batch(ctranslate2.StorageView.from_array(ids.numpy().astype(np.int32)),
                                       lengths, types.tolist())
            with torch.inference_mode():
                return model.classifier(torch.as_tensor(np.asarray(result.pooler_output)))
        runners[name] = run
    return runners


def precision_runners(model, directory, names, tmp, calibration=None):
    """name -> ``run(ids, types, mask) -> logits`` for each row of ``names`` that applies."""
    runners = {}

    def bertkit(m, precision):
        def run(ids, types, mask):  # as the engine's classifier rows: head_logits ([CLS] alone where cls_pays)
            with torch.inference_mode(), autocast(precision):
                return m.head_logits(ids, types, mask).float()
        return run

    for precision in ("fp32", "bf16", "int8"):  # as the engine runs each (modeldir.int8.prepare)
        if f"bertkit {precision}" in names:
            prepared = prepare(copy.deepcopy(model), precision)
            if precision == "fp32":  # load() packs fp32 layers for few rows where measured faster
                pack_fp32(prepared)
            runners[f"bertkit {precision}"] = bertkit(prepared, precision)
    if "bertkit fp32 plain" in names:  # fp32 as PyTorch runs it, without pack_fp32
        runners["bertkit fp32 plain"] = bertkit(model, "fp32")
    for precision in ("fp32", "bf16"):  # the engine's compiled route (load(compile="on"))
        if f"bertkit {precision} compiled" in names:
            from bertkit.inference import compiled

            prepared = prepare(copy.deepcopy(model), precision)
            if precision == "fp32":  # as load() does before compiling: the packed layers stay packed
                pack_fp32(prepared)
            start = time.perf_counter()
            compiled.compile_encoder(prepared)
            compiled.warm_up(prepared, precision)
            print(f"  (bertkit {precision} compiled: {time.perf_counter() - start:.0f} s to compile)", flush=True)
            runners[f"bertkit {precision} compiled"] = bertkit(prepared, precision)
    if "bertkit int8 static" in names:  # bertkit.inference.static_int8, compiled before timing
        from bertkit.inference import static_int8

        if calibration is None:
            print("  (bertkit int8 static skipped: no SST-2 train text to calibrate on)", flush=True)
        elif static_int8.blocker():
            print(f"  (bertkit int8 static skipped: {static_int8.blocker()})", flush=True)
        else:
            start = time.perf_counter()
            quantised = copy.deepcopy(model)
            static_int8.quantize_static(quantised, static_int8.calibration_batches(calibration))
            static_int8.warm_up(quantised)  # its package (lone inputs) and batch graph
            print(f"  (bertkit int8 static: {time.perf_counter() - start:.0f} s to calibrate and compile)", flush=True)
            runners["bertkit int8 static"] = bertkit(quantised, "fp32")
    for precision in ("fp32", "int8"):
        if f"ort {precision}" in names:
            from bertkit.inference.export import OrtModel, export_onnx

            ort = OrtModel(export_onnx(directory, Path(tmp) / f"{precision}.onnx", int8=precision == "int8"),
                           threads=torch.get_num_threads())
            runners[f"ort {precision}"] = lambda ids, types, mask, o=ort: o(ids, types, mask).logits
    if {"hf fp32", "hf bf16", "hf int8"} & set(names):
        import transformers

        hf = transformers.BertForSequenceClassification.from_pretrained(
            directory, attn_implementation="sdpa", local_files_only=True).eval()

        def hf_run(m):
            def run(ids, types, mask):
                with torch.inference_mode():
                    return m(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
            return run

        if "hf fp32" in names:
            runners["hf fp32"] = hf_run(hf)
        if "hf bf16" in names:  # the weights stored in bf16, as bench/serve.py's "hf bf16" pipelines
            runners["hf bf16"] = hf_run(copy.deepcopy(hf).to(torch.bfloat16))
        if "hf int8" in names:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                q = torch.ao.quantization.quantize_dynamic(copy.deepcopy(hf), {torch.nn.Linear},
                                                           dtype=torch.qint8)
            runners["hf int8"] = hf_run(q)
    runners.update(openvino_runners(directory, names, tmp, calibration))
    runners.update(ctranslate2_runners(model, directory, names, tmp))
    return runners


def check_logits(runners, batch):
    if "bertkit fp32" not in runners:
        return
    ref = runners["bertkit fp32"](*batch)
    scale = float(ref.max() - ref.min()) or 1.0
    for name, run in runners.items():
        diff = float((run(*batch) - ref).abs().max())
        limit = 1e-3 if name.endswith("fp32") else max(0.1 * scale, 1e-2)
        if diff > limit:
            raise SystemExit(f"{name} differs from bertkit fp32 by {diff:.3g} (limit {limit:.3g})")


def run_each(run, batches):
    for b in batches:
        run(*b)


def compare_precisions(label, workloads, runners, args, results):
    best = best_of_rounds({n: (functools.partial(run_each, runners[n]), b) for n, b in workloads.items()}, args)
    base = best.get("hf fp32")
    cells = [f"{n} {v:7.1f}" + (f" (x{v / base:.2f})" if base else "") for n, v in best.items()]
    print(f"  {label:<24} seq/s vs hf fp32: " + " | ".join(cells), flush=True)
    results.append({"workload": label, "seq_per_s": best})


def bench_precision_shape(shape: str, args, results, text_ids, calibration=None):
    config = BertConfig.preset(shape)
    torch.manual_seed(0)
    model = BertForSequenceClassification(config, 2).eval()
    names = [r.strip() for r in args.rows.split(",") if r.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        save_pretrained(model, Path(tmp) / "m")
        runners = precision_runners(model, Path(tmp) / "m", names, tmp, calibration)
        print(f"{shape}: {config.num_hidden_layers} layers, hidden {config.hidden_size} "
              f"(rows: {', '.join(runners)})", flush=True)
        g = torch.Generator().manual_seed(1)
        for size in [int(b) for b in args.batch_sizes.split(",") if b.strip()]:
            if text_ids is None:
                ids = torch.randint(1000, config.vocab_size, (size, args.seq_len), generator=g)
                batch = (ids, torch.zeros_like(ids), torch.ones_like(ids))
            else:
                batch = packed_batch(text_ids, size, args.seq_len)
            check_logits(runners, batch)
            compare_precisions(f"fixed {args.seq_len} x {size}", {n: [batch] for n in runners},
                               runners, args, results)
        if text_ids is None:
            print("  (SST-2 dev not found under ../shared/data: variable-length text skipped)")
            return
        file_order, by_length = text_workloads(text_ids, args.text_batch, config.hidden_size, args)
        check_logits(runners, by_length[0])
        workloads = {n: (file_order if n.startswith("hf") else by_length) for n in runners}
        compare_precisions(f"SST-2 dev x {args.text_batch}", workloads, runners, args, results)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import transformers
    except ImportError:
        print("transformers is not installed: nothing to compare against", file=sys.stderr)
        return 1
    import warnings

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.default_malloc:
        from bertkit.cpu import keep_freed_memory

        keep_freed_memory()  # process-wide: the same allocator for every row
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, transformers "
          f"{transformers.__version__}, clock {args.clock}, glibc malloc "
          f"{'default' if args.default_malloc else 'keeping freed memory'}")
    text_ids = sst2_token_ids(args.text_limit)
    results: list[dict] = []
    if args.precision:
        calibrated = ("ov int8", "bertkit int8 static")  # the rows calibrated on SST-2 train text
        train = sst2_token_ids(0, "train") if any(r.strip() in calibrated for r in args.rows.split(",")) else None
        calibration = train[:CALIBRATION] if train else None
        from machine import describe, line

        print(f"{line(describe())}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for shape in args.shapes.split(","):
        if args.precision:
            bench_precision_shape(shape.strip(), args, results, text_ids, calibration)
        else:
            bench_shape(shape.strip(), args, results, text_ids)
    if args.precision:
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
