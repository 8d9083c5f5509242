"""OpenVINO as an optional runtime: a model directory converted to OpenVINO (fp32, bf16 where the
CPU computes it natively, or INT8 by NNCF post-training static quantisation calibrated on real
task inputs), and run with the interface of a bertkit model.

``pip install bertkit[openvino]`` (``openvino`` and ``nncf``). The graph is bertkit's own ONNX
export (:func:`bertkit.inference.export.export_onnx`: the same inputs and output names), read by
OpenVINO. INT8 is static: NNCF runs the calibration batches through the float graph, fixes one
scale per activation tensor, and inserts quantise/dequantise pairs that OpenVINO's CPU plugin
fuses into INT8 kernels (matrix products *and* the attention matmuls, unlike PyTorch's
dynamic INT8, which quantises only the linear layers and re-measures every activation at run
time). Calibration inputs must be real text of the model's task (:func:`calibration_batches`),
never random ids: activation ranges of random ids are not those of text.

Behind the inference engine: :func:`load_openvino` returns an :class:`OpenVinoInference`, the
engine of :func:`bertkit.inference.load` whose task-head rows (``predict``, the server's plans
for classification, regression, tagging and question answering) run on OpenVINO; the rest
(embeddings, fill-mask, attention maps, multiple choice) stays on the PyTorch fp32 model.

``bf16``: OpenVINO runs bf16 only on a CPU that has it natively (its ``OPTIMIZATION_CAPABILITIES``
lists ``BF16``); elsewhere it silently stays fp32, so :func:`compile_model` refuses ``bf16`` there
instead of timing an fp32 model under a bf16 label.

``--runtime auto`` (:func:`choose_runtime`, :func:`on_openvino`): OpenVINO for a task head's
batches up to the size where it was measured faster than every PyTorch route at the precision
the model runs at (:data:`MEASURED_FASTER`), PyTorch everywhere else; larger batches and the
other routes stay on PyTorch at that same precision.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bertkit.errors import BertkitError, DataFormatError
from bertkit.inference.calibration import encoder_rows, padded_batches
from bertkit.inference.engine import BertInference, owning
from bertkit.inference.export import INPUTS
from bertkit.model.outputs import ModelOutput

XML = "openvino_model.xml"
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}  # int8 layers come from the graph
# (CPU class, precision) -> the largest batch, in padded tokens (rows x the longest row), that
# OpenVINO's CPU plugin ran faster than bertkit's fastest PyTorch route at that precision: under
# --runtime auto a task head's batches up to that size run on OpenVINO, larger ones on PyTorch.
# bf16 on the Intel Xeon with AMX (BERT-Base, one thread, CPU clock, 2026-12-02): bertkit /
# OpenVINO 0.69 at 1 x 16 tokens, 0.86 at 1 x 32, 0.97 at 1 x 64, 1.07 at 1 x 128, 1.15-1.27 on
# batches of 8 and 32 x 128 and SST-2 dev (since a classifier's last layer runs at [CLS] only
# there; on 2026-11-26 OpenVINO led at every lone length and was level on batches); at a few
# rows both run oneDNN's AMX bf16 kernels, OpenVINO's streaming the weights faster. Where
# bertkit's own route is as fast or faster at every size (INT8: static INT8 leads OpenVINO's),
# or where nothing was measured, --runtime auto stays on PyTorch. The Intel Xeon with VNNI only
# (avx512-vnni) was measured and has no entry: OpenVINO's fp32 was 1.27-1.39x bertkit's on a
# lone 1 x 128 input (1.12x once fp32 layers were packed for oneDNN, 0.98x once packed for MKL's
# sgemm, and 1.06-1.12x at 1 x 16-32; 2026-11-27) but 0.68-0.96x on SST-2 batches, and static
# INT8 is level or ahead (0.99-1.18x, one thread; 2026-11-26); behind the server (BERT-Base-sized
# fp32, two runs) OpenVINO answered a lone request 1.03-1.06x as fast but 0.51-0.58x the requests
# at concurrency 32; an fp32 answer on OpenVINO also moves by ~1e-3. The avx512_bf16 EPYC has no
# entry either. In one process OpenVINO's bf16 runs a lone input faster there (BERT-Base,
# bench/inference.py --precision --seq-len L --batch-sizes 1; 2026-12-07, seventh session):
# bertkit / OpenVINO 0.84-0.86 at 1 x 16, 0.88 at 1 x 32, 0.96 at 1 x 64 on one thread (CPU
# clock), 0.85 and 0.87 at 1 x 32 and 1 x 64 on two (wall clock), 0.96-0.98 at 1 x 128, 1.02-1.06
# on 8 and 32 x 128. But behind the server, at its default two threads with --model-process,
# batches of at most 64 tokens on OpenVINO answered a lone request later (p50 38.5 against 30.5
# ms, base-sized SST-2, 320 requests) and fewer requests at concurrency 32 (52.0 against 54.9);
# on 2026-12-01, OpenVINO for every batch: sooner on one thread (p50 33.8 against 37.2 ms),
# later on two (34.2 against 25.1). Static INT8 leads OpenVINO's INT8 there (1.02-1.16x).
MEASURED_FASTER: dict[tuple[str, str], int] = {("amx", "bf16"): 64}


def require_openvino():
    """The ``openvino`` module, or a :class:`BertkitError` saying how to install it."""
    try:
        import openvino
    except ImportError as e:
        raise BertkitError("the OpenVINO runtime needs the openvino package: "
                           "pip install 'bertkit[openvino]'") from e
    return openvino


def native_bf16() -> bool:
    """Does OpenVINO's CPU plugin run bf16 on this CPU (not emulated)?"""
    ov = require_openvino()
    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def installed() -> bool:
    """Can the ``openvino`` package be imported here?"""
    try:
        require_openvino()
    except BertkitError:
        return False
    return True


def choose_runtime(bert: BertInference) -> tuple[str, str]:
    """``(torch | openvino, why)``: what ``--runtime auto`` runs ``bert``'s task-head rows on.
    OpenVINO only on the CPU, at a (CPU class, precision) pair of :data:`MEASURED_FASTER`
    (``bert.precision``: the precision ``auto`` or the user chose), for a model whose task
    head's rows OpenVINO's graph computes (classification, regression, tagging, spans), with
    ``openvino`` installed and its plugin computing that precision natively; else PyTorch."""
    from bertkit.cpu import cpu_class

    if bert.device.type != "cpu":
        return "torch", f"auto: OpenVINO runs on the CPU, this model on {bert.device}"
    klass = cpu_class()
    if (klass, bert.precision) not in MEASURED_FASTER:
        return "torch", (f"auto: OpenVINO was not measured faster than PyTorch for {bert.precision} on CPU "
                         f"class {klass or 'unknown'}")
    family = bert.family()
    if family is None or not family.rows_from_outputs:
        return "torch", f"auto: OpenVINO runs a task head's rows, and this model's ({bert.task}) run on PyTorch"
    if not installed():
        return "torch", "auto: openvino is not installed (pip install 'bertkit[openvino]')"
    if bert.precision == "bf16" and not native_bf16():
        return "torch", "auto: OpenVINO's CPU plugin does not compute bf16 on this CPU"
    return "openvino", (f"auto: measured faster than PyTorch for {bert.precision} on CPU class {klass} in batches "
                        f"of at most {MEASURED_FASTER[klass, bert.precision]} tokens; larger batches on PyTorch")


def on_openvino(bert: BertInference, threads: int | None = None) -> BertInference:
    """``bert`` with its task-head rows on OpenVINO at its own precision when
    :func:`choose_runtime` says so, in batches up to :data:`MEASURED_FASTER`'s size (the model
    directory converted to a temporary folder; larger batches and the other routes stay on
    ``bert``'s PyTorch model at that precision), else ``bert`` itself; either way
    :attr:`~BertInference.runtime_reason` says why."""
    from bertkit.cpu import cpu_class

    runtime, why = choose_runtime(bert)
    if runtime == "torch":
        bert.runtime_reason = why
        return bert
    engine = _converted_engine(bert.model, bert.tokenizer, bert.source, bert.precision, threads,
                               torch_precision=bert.precision)
    engine.precision_reason, engine.runtime_reason = bert.precision_reason, why
    engine.max_tokens = MEASURED_FASTER[cpu_class(), bert.precision]
    return engine


def calibration_batches(rows: Sequence, batch_size: int = 1) -> list[dict[str, np.ndarray]]:
    """Calibration inputs from rows of real text (token-id lists or encodings, each
    ``[CLS] ... [SEP]``), ``batch_size`` rows a batch."""
    return padded_batches(rows, batch_size)


def convert(model_dir: str | Path, out_dir: str | Path, int8: bool = False,
            calibration: Iterable[dict[str, np.ndarray]] | None = None, fast_bias_correction: bool = True) -> Path:
    """Convert the float model directory ``model_dir`` to ``out_dir/openvino_model.xml`` (+ .bin).

    ``int8=True`` quantises with NNCF (``model_type=TRANSFORMER``) on ``calibration`` (a list
    from :func:`calibration_batches`; required). Returns the ``.xml`` path.
    """
    ov = require_openvino()
    from bertkit.inference.export import export_onnx

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx = export_onnx(model_dir, out_dir / "model.onnx")
    model = ov.Core().read_model(str(onnx))
    if int8:
        calibration = list(calibration or [])
        if not calibration:
            raise BertkitError("OpenVINO INT8 needs calibration batches of real task text")
        model = _quantize(model, calibration, fast_bias_correction)
    xml = out_dir / XML
    ov.save_model(model, str(xml))
    onnx.unlink()
    return xml


def _quantize(model, calibration: list, fast_bias_correction: bool):
    """NNCF post-training static INT8 of an OpenVINO float model. Without VNNI the CPU's
    u8 x s8 kernels add products in saturating 16-bit pairs, so weights get 7 bits there
    (NNCF's overflow fix on every layer: logits on SST-2 text 4x closer to fp32 than with
    its first-layer-only default, measured on an AVX2-only EPYC)."""
    import nncf
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix

    from bertkit.cpu import cpu_has_vnni

    advanced = AdvancedQuantizationParameters(
        overflow_fix=OverflowFix.FIRST_LAYER if cpu_has_vnni() else OverflowFix.ENABLE)
    return nncf.quantize(model, nncf.Dataset(calibration), model_type=nncf.ModelType.TRANSFORMER,
                         subset_size=len(calibration), fast_bias_correction=fast_bias_correction,
                         advanced_parameters=advanced)


def compile_model(xml: str | Path, precision: str = "fp32", threads: int | None = None):
    """``xml`` compiled for the CPU at ``precision`` (fp32, bf16 or int8: an INT8 graph from
    :func:`convert`), one stream, ``threads`` inference threads (default: torch's)."""
    ov = require_openvino()
    if precision not in PRECISION_HINTS:
        raise BertkitError(f"OpenVINO precision must be one of {', '.join(PRECISION_HINTS)}, got {precision!r}")
    if precision == "bf16" and not native_bf16():
        raise BertkitError("OpenVINO runs bf16 only on a CPU with native bf16 (avx512_bf16/AMX); "
                           "this one has none: use fp32 or int8")
    config = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision], "NUM_STREAMS": 1,
              "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads or torch.get_num_threads()}
    return ov.Core().compile_model(str(xml), "CPU", config)


class OvModel(nn.Module):
    """A compiled OpenVINO model called like a bertkit model:
    ``model(input_ids, token_type_ids, attention_mask)`` -> :class:`ModelOutput` (CPU tensors)."""

    def __init__(self, xml: str | Path, precision: str = "fp32", threads: int | None = None, config=None):
        super().__init__()
        self.compiled = compile_model(xml, precision, threads)
        self.request = self.compiled.create_infer_request()
        self.names = [o.get_any_name() for o in self.compiled.outputs]
        self.precision = precision
        self.config = config

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, **_ignored) -> ModelOutput:
        given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        defaults = {"attention_mask": torch.ones_like(input_ids), "token_type_ids": torch.zeros_like(input_ids)}
        feeds = {name: (given[name] if given[name] is not None else defaults[name]).cpu().numpy().astype(np.int64)
                 for name in INPUTS}
        results = self.request.infer(feeds)
        out = ModelOutput()
        for port, name in zip(self.compiled.outputs, self.names):
            setattr(out, name, torch.from_numpy(np.array(results[port])))
        return out


# ------------------------------------------------------------------ behind the inference engine
class OpenVinoInference(BertInference):
    """A :class:`~bertkit.inference.engine.BertInference` whose task-head rows (classification,
    regression, token classification, question answering: ``predict`` and the server's plans)
    run on OpenVINO at ``ov_precision``. What the exported graph does not compute (embeddings,
    fill-mask, attention maps, multiple choice) runs on the PyTorch model it was built from,
    which stays loaded, at ``torch_precision`` (fp32 for ``--runtime openvino``, the model's own
    precision for ``--runtime auto``); :attr:`runtime` says ``openvino``. :attr:`max_tokens`
    (``--runtime auto``: :data:`MEASURED_FASTER`'s size): a batch of more padded tokens than
    that (rows x the longest row) runs on the PyTorch model too; None: every batch on OpenVINO."""

    runtime = "openvino"
    max_tokens: int | None = None

    def __init__(self, model, tokenizer, xml: str | Path, ov_precision: str = "fp32",
                 source: str = "model", threads: int | None = None, torch_precision: str = "fp32"):
        super().__init__(model, tokenizer, device="cpu", source=source, precision=torch_precision)
        self.ov_model = OvModel(xml, ov_precision, threads, config=model.config)
        self.ov_precision = ov_precision
        self._lock = threading.Lock()  # one infer request: one batch at a time

    @property
    def served_precision(self) -> str:
        return self.ov_precision

    @property
    def runs_own_graph(self) -> bool:
        """Only without :attr:`max_tokens`: the batches over it run on the PyTorch model, which
        may run them on their real tokens (OpenVINO's own batches stay padded, at most
        ``max_tokens`` tokens each)."""
        return self.max_tokens is None

    def run_rows(self, key: tuple, rows: Sequence) -> list:
        """As :meth:`TaskInference.run_rows`; a task family's rows that are the model's named
        outputs (classification, regression, tagging, spans) run on OpenVINO's graph."""
        kind = key[0]
        if not getattr(kind, "rows_from_outputs", False) or (
                self.max_tokens is not None and len(rows) * max(len(r.input_ids) for r in rows) > self.max_tokens):
            return super().run_rows(key, rows)
        ids, types, mask = self._pad(rows)
        with self._lock:
            return kind.row_outputs(self.ov_model, ids, types, mask, [len(r.input_ids) for r in rows])


def check_calibration_fits(model_dir: str | Path, inputs: Sequence, path: str | Path) -> None:
    """Calibration inputs must be the model's task's own kind of input: pairs for a pair
    task, single texts otherwise; and a model without a task head has nothing OpenVINO runs
    on INT8 (its routes run on PyTorch fp32), so INT8 is refused for it."""
    from bertkit.modeldir.entry import saved_task_options
    from bertkit.tasks import get_task

    name, options = saved_task_options(model_dir)
    if name is None:
        raise BertkitError(f"{model_dir}: --runtime openvino --precision int8 quantises a task head, and this model "
                           "has none (a masked-LM or encoder checkpoint: its routes run on PyTorch fp32); serve it "
                           "with --precision fp32, or --runtime torch --precision int8")
    task = get_task(name, **options)
    pairs = isinstance(inputs[0], tuple)
    wants = getattr(task, "pair", None)
    if wants is not None and pairs != bool(wants):
        kind = "sentence pairs (a tab between the two texts)" if wants else "single texts (no tab)"
        raise DataFormatError(path, f"holds {'tab-separated pairs' if pairs else 'single texts'}, but {model_dir} "
                                    f"was fine-tuned on {name}, which takes {kind}")


def load_openvino(model_dir: str | Path, precision: str = "fp32", calibration: Sequence | None = None,
                  out_dir: str | Path | None = None, threads: int | None = None) -> OpenVinoInference:
    """``model_dir`` (a float model directory) converted to OpenVINO and loaded behind the
    inference engine. ``precision``: ``fp32``, ``bf16`` (native-bf16 CPUs only), ``int8``
    (NNCF static quantisation calibrated on ``calibration``: texts, or ``(text, pair)`` tuples,
    of the model's own task, a few hundred, or the token rows a fine-tuned directory saved) or ``auto`` (:func:`bertkit.precision.resolve`'s
    CPU rule: bf16 where native, else fp32; never int8). The converted model is written to
    ``out_dir`` (default: a temporary folder, removed with the returned object)."""
    from bertkit.checkpoint import load_tokenizer
    from bertkit.modeldir.int8 import load_model
    from bertkit.precision import resolve

    precision, reason = resolve(precision, "cpu", ("auto", "fp32", "bf16", "int8"))
    model = load_model(model_dir)
    tokenizer = load_tokenizer(model_dir)
    batches = None
    if precision == "int8":
        if not calibration:
            raise BertkitError("OpenVINO int8 needs calibration texts of the model's task "
                               "(a few hundred), never random ids")
        limit = min(model.config.max_position_embeddings, 512)
        batches = calibration_batches(encoder_rows(calibration, tokenizer, limit, model.config.vocab_size))
    engine = _converted_engine(model, tokenizer, str(model_dir), precision, threads, out_dir=out_dir,
                               batches=batches)
    engine.precision_reason = reason  # of ov_precision (the PyTorch rows run fp32)
    return engine


def _converted_engine(model, tokenizer, source: str, precision: str, threads: int | None,
                      torch_precision: str = "fp32", out_dir: str | Path | None = None,
                      batches: list | None = None) -> OpenVinoInference:
    """The model directory ``source`` converted (INT8 on ``batches`` at ``int8``) into
    ``out_dir`` (default: a temporary folder that lives as long as the engine) and served by
    an :class:`OpenVinoInference` over ``model``."""
    keep = None
    if out_dir is None:
        keep = tempfile.TemporaryDirectory(prefix="bertkit-openvino-")
        out_dir = keep.name
    xml = convert(source, out_dir, int8=precision == "int8", calibration=batches)
    engine = owning(OpenVinoInference(model, tokenizer, xml, precision, source=source, threads=threads,
                                      torch_precision=torch_precision))
    engine._converted = keep
    return engine
