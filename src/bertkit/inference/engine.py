"""Fill-mask and feature extraction: the library API behind ``bertkit fill-mask`` / ``embed``.

In a notebook::

    from bertkit.inference import load
    bert = load("path/to/model")                      # any BERT directory (bertkit or HF)
    bert.fill_mask("the man went to the [MASK] .")    # [[{"token": ..., "score": ...}, ...]]
    bert.embed(["a sentence", "another"], layers=(-1, -2, -3, -4), pool="cls")  # (2, 4H)

Prompts: a directory with sentence-transformers' ``prompts`` (``config_sentence_transformers.json``)
embeds ``prompt + text`` as ``SentenceTransformer.encode`` does: ``embed(texts,
prompt_name="query")``; without a name, its ``default_prompt_name``'s prompt (:meth:`BertInference.prompt_text`).

Inputs are batched by length (sorted, so a batch holds sequences of nearly equal length and
almost no compute goes to padding); results come back in input order. A sequence longer
than ``max_length`` (default: the one limit of every door, :meth:`BertInference.token_limit`:
the model's saved ``max_seq_length``, else its positions) is truncated with a warning, or is
an error with ``on_overflow="error"``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertkit import cpu
from bertkit.checkpoint import check_vocabulary, load_tokenizer
from bertkit.config import UNPAD_MODES
from bertkit.errors import BertkitError, CheckpointError, OptionError
from bertkit.inference import compiled
from bertkit.inference.features import run_model
from bertkit.inference.heads import TaskInference, hidden_features, pooled_vectors
from bertkit.model import BertModel, BertPreTrainedModel
from bertkit.modeldir.entry import finetune_entry, resolve_max_seq_length
from bertkit.modeldir.int8 import is_int8_dir, load_model, pack_fp32, pack_now, prepare
from bertkit.modeldir.st_layout import read_st_prompts
from bertkit.precision import INFERENCE, INFERENCE_DEFAULT, autocast, from_dtype, resolve
from bertkit.tasks.base import FeatureSet, Task
from bertkit.training.distributed import pick_device
from bertkit.training.sampler import length_batches

resolve_device = pick_device  # the former name here; one device resolution for all of bertkit

POOLINGS = ("cls", "mean", "max", "none")
COMBINES = ("concat", "sum")


class BertInference(TaskInference):
    """A loaded model + tokenizer, on a device, at a precision (:mod:`bertkit.precision`:
    ``auto`` resolved at construction; int8: :mod:`bertkit.modeldir.int8`), in eval mode. Task predictions on raw text
    (``predict``, the server's plans) come from :class:`~bertkit.inference.heads.TaskInference`.
    """

    runtime = "torch"  # what runs the task-head rows (bertkit.inference.openvino: "openvino")
    runtime_reason = "as asked"  # --runtime auto's choice: bertkit.inference.openvino.choose_runtime
    compile_reason = "--compile off"  # load(compile=) says why it compiled or not
    attention_reason = "the model's own"  # unpad() says why batches run padded or on their real tokens

    @property
    def served_precision(self) -> str:
        """The precision the task-head rows run at (``precision``; OpenVINO's own there)."""
        return self.precision

    def __init__(
        self,
        model: BertPreTrainedModel,
        tokenizer: Any,
        device: str | torch.device = "cpu",
        source: str = "model",
        precision: str = INFERENCE_DEFAULT,
    ):
        check_vocabulary(tokenizer, model.config.vocab_size, source)
        self.device = pick_device(device)
        self.precision, self.precision_reason = resolve(precision, self.device, INFERENCE,
                                                        hidden_size=model.config.hidden_size)
        self.model = prepare(model.to(device=self.device).eval(), self.precision)
        self.tokenizer = tokenizer
        self.source = source
        self.max_positions = model.config.max_position_embeddings
        family = self.family()
        self.max_length = resolve_max_seq_length(None, finetune_entry(model.config),
                                                 family.default_max_seq_length if family else None,
                                                 self.max_positions)
        self.long_text = self.long_text_choice()  # predict's default: the model's saved choice
        self.prompts, self.default_prompt_name = read_st_prompts(source) if Path(source).is_dir() else ({}, None)

    def prompt_text(self, prompt_name: str | None = None) -> str:
        """The text put before every input to embed, by sentence-transformers' rule: the prompt
        named ``prompt_name``; None: the ``default_prompt_name``'s prompt, else none (``""``).
        A name the model has no prompt for: a :class:`BertkitError` naming those it has."""
        if prompt_name is None:
            return self.prompts.get(self.default_prompt_name, "") if self.default_prompt_name else ""
        if prompt_name not in self.prompts:
            known = ", ".join(map(repr, self.prompts)) or "none: the directory has no config_sentence_transformers.json prompts"
            raise BertkitError(f"prompt_name {prompt_name!r} is not one of the model's prompts ({known})")
        return self.prompts[prompt_name]

    def compile(self, mode: str = "auto") -> bool:
        """Route the encoder through ``torch.compile`` if ``mode`` (``auto``/``on``/``off``:
        :func:`bertkit.inference.compiled.decide`) says so; whether it did. The graphs are
        built at the first forward passes (:meth:`warm_up` builds them now)."""
        compiling, self.compile_reason = compiled.decide(mode, self.precision, self.device, self.model)
        if compiling and not compiled.is_compiled(self.model):
            compiled.compile_encoder(self.model)
        return compiling

    @property
    def attention_impl(self) -> str:
        """``padded`` or ``unpadded`` (:mod:`bertkit.model.unpadded`): how a batch of rows of
        different lengths runs."""
        return getattr(self.model.config, "attention_impl", "padded")

    def unpad(self, mode: str = "auto", option: str = "--attention-impl") -> bool:
        """Run batches of rows of different lengths on their real tokens only if ``mode`` says
        so (``auto``, ``padded``, ``unpadded``; :data:`UNPAD_MODES`): the same answers within
        float rounding (:mod:`bertkit.model.unpadded`), less work where rows are padded (a
        server's batches of mixed requests: BERT-Tiny's forward passes 1.2x faster at
        concurrency 32 on the AMX Xeon, docs/serving-results.md). ``unpadded`` on the eager PyTorch route only:
        a compiled graph, static INT8's exported graph and OpenVINO's keep fixed shapes (an
        OptionError naming ``option``). ``auto`` unpads where that holds: in fp32, and in bf16
        on the CPU classes of :func:`bertkit.cpu.bf16_unpadded` (the avx512_bf16 EPYC, where a
        bf16 row keeps the padded batch's numbers: its server answered 1.10-1.11x the requests
        at concurrency 32 on a base-sized model; the AMX Xeon, where padding keeps no row's
        numbers either, oneDNN rounding a row by its batch's row count: 1.58x there);
        elsewhere a bf16/fp16 row's rounding may move with the batch's shape, and dynamic INT8
        takes each batch's activation scale over the padding too (without it the scores moved
        by up to 0.08 on a toy model), so ``auto`` stays padded there and the server answers
        as ``predict`` does. Whether batches now run unpadded; :attr:`attention_reason` says why."""
        if mode not in UNPAD_MODES:
            raise OptionError(f"{option} must be one of {', '.join(UNPAD_MODES)}, got {mode!r}")
        blocker = self._unpad_blocker()
        if mode == "unpadded" and blocker:
            raise OptionError(f"{option} unpadded: {blocker}; use padded or auto")
        bf16_why = cpu.bf16_unpadded() if self.precision == "bf16" and self.device.type == "cpu" else None
        if blocker is None and self.precision in ("bf16", "fp16") and not bf16_why:
            blocker = (f"{self.precision} rounds the same row differently in other shapes: padded, the "
                       "server answers as the other doors do")
        elif blocker is None and self.precision == "int8":
            blocker = ("dynamic INT8 scales a batch's activations over its padding too: padded, the "
                       "server answers as the other doors do")
        unpadded = mode == "unpadded" or (mode == "auto" and blocker is None)
        self.model.config.attention_impl = "unpadded" if unpadded else "padded"
        self.attention_reason = (f"{option} {mode}" if mode != "auto" else
                                 f"auto: {blocker}" if blocker else
                                 "auto: the eager route computes only the real tokens of a batch"
                                 + (f" ({bf16_why})" if bf16_why else ""))
        return unpadded

    @property
    def runs_own_graph(self) -> bool:
        """Does every task-head batch run on another runtime's graph of fixed shapes?"""
        return self.runtime != "torch"

    def _unpad_blocker(self) -> str | None:
        if self.runs_own_graph:
            return f"the {self.runtime} runtime runs its own graph"
        if getattr(self.model, "bertkit_static_int8", False):
            return "static INT8 runs an exported graph of fixed shapes"
        if compiled.is_compiled(self.model):
            return "the compiled graph keeps the padded shapes"
        return None

    def warm_up(self, background: bool = False) -> None:
        """Build the compiled graphs now (one input, several), and make the fp32 layers' packed
        copies (:func:`~bertkit.modeldir.int8.pack_now`), not at the first requests; in the
        thread whose thread count the kernels should use. ``background``: static INT8's
        batch graph (:func:`bertkit.inference.static_int8.warm_up`), or the compiled route's
        graphs (:func:`bertkit.inference.compiled.warm_up`), compile in a thread of their own
        while a slower form answers."""
        if isinstance(self.model, torch.nn.Module):
            pack_now(self.model)
        if getattr(self.model, "bertkit_static_int8", False):
            from bertkit.inference import static_int8

            static_int8.warm_up(self.model, background)
            self.compile_reason = static_int8.describe(self.model)
        elif compiled.is_compiled(self.model):
            compiled.warm_up(self.model, self.precision, self.device, background=background)
            if background:
                self.compile_reason = f"{self.compile_reason}, {compiled.describe(self.model)}"

    @property
    def compiling(self) -> bool:
        """Whether a compiled form is still being built in the background (``warm_up(background=True)``:
        static INT8's batch graph, the compiled route's graphs); answers meanwhile come from a
        slower form."""
        from bertkit.inference import static_int8

        return static_int8.compiling(self.model) or compiled.compiling(self.model)

    @property
    def default_pooling(self) -> str:
        """The pooling ``embed`` uses when none is asked: the one the model was trained with
        (its task family's ``pooling``, e.g. a sentence-embedding fine-tune's), else ``cls``."""
        return getattr(self.family(), "pooling", None) or "cls"

    @property
    def encoder(self) -> BertModel:
        return self.model.encoder_model()

    def run_features(self, task: Task, features: FeatureSet, batch_size: int = 32,
                     progress: bool | None = None, desc: str = "predict") -> dict[str, list[np.ndarray]]:
        """``task``'s outputs for prepared ``features`` (a :class:`FeatureSet` of its
        ``featurize``), at this engine's device and precision: :func:`run_model`."""
        return run_model(task, self.model, features, batch_size, self.device, self.precision, progress, desc)

    # ------------------------------------------------------------------ encoding
    def token_limit(self, max_length: int | None = None) -> int:
        """The one token limit of an input at every door: ``max_length`` if given, else the
        model's (:attr:`max_length`: its saved ``max_seq_length``, else its positions), never
        more than its positions."""
        return min(max_length or self.max_length, self.max_positions)

    def encode(self, texts, pairs=None, max_length=None, on_overflow="truncate"):
        """Token encodings (specials added), truncated to ``max_length`` as documented above."""
        if on_overflow not in ("truncate", "error"):
            raise ValueError(f"on_overflow must be 'truncate' or 'error', got {on_overflow!r}")
        limit = self.token_limit(max_length)
        encodings = self.tokenizer.encode_batch(texts, pairs, max_length=limit, truncation="longest_first")
        overflowing = [i for i, enc in enumerate(encodings) if getattr(enc, "num_truncated", 0)]
        if overflowing:
            first = overflowing[0]
            length = len(encodings[first].input_ids) + encodings[first].num_truncated
            if on_overflow == "error":
                raise BertkitError(
                    f"input {first + 1} has {length} tokens, more than the limit of {limit} "
                    f"({len(overflowing)} input(s) too long); shorten it or use on_overflow='truncate'"
                )
            warnings.warn(
                f"{len(overflowing)} input(s) longer than {limit} tokens were truncated "
                f"(first: input {first + 1}, {length} tokens)",
                stacklevel=3,
            )
        return encodings

    def _batches(self, encodings, batch_size: int, progress: bool | None, desc: str) -> Iterator:
        """``(indices, input_ids, token_type_ids, attention_mask)`` per length-sorted batch."""
        from tqdm.auto import tqdm

        groups = length_batches([len(e.input_ids) for e in encodings], batch_size, longest_first=True)
        from bertkit.runlog import bar_disabled

        for indices in tqdm(groups, desc=desc, unit="batch", disable=bar_disabled(progress)):
            yield (indices, *self._pad([encodings[i] for i in indices]))

    # ------------------------------------------------------------------ fill-mask
    def fill_mask(
        self,
        texts: str | Sequence[str],
        top_k: int = 5,
        batch_size: int = 32,
        max_length: int | None = None,
        on_overflow: str = "truncate",
        progress: bool = False,
    ):
        """Top-k predictions for every ``[MASK]`` in each text.

        One text -> a list (one entry per ``[MASK]``, left to right) of ``top_k`` dicts
        ``{"score", "token" (id), "token_str", "sequence"}`` (softmax probability, best first;
        the shape of ``/fill-mask`` and of Hugging Face's pipeline); a list of texts -> a list
        of those. Batched and decoded by the same plan as the server's (:meth:`mask_plan`).
        """
        if getattr(self.model, "mlm_head", None) is None:
            raise CheckpointError(f"{self.source}: the checkpoint has no masked-LM head for fill-mask")
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        encodings = self.encode(texts, max_length=max_length, on_overflow=on_overflow)
        mask_id = self.tokenizer.mask_token_id
        for i, enc in enumerate(encodings):
            if mask_id not in enc.input_ids:
                raise BertkitError(f"input {i + 1} has no [MASK] token (after truncation): {texts[i]!r}")
        plans = [self.mask_plan(enc, top_k) for enc in encodings]
        results = self.run_plans(plans, max_batch_size=batch_size, progress=progress, desc="fill-mask")
        return results[0] if single else results

    # ------------------------------------------------------------------ embeddings
    def _prompted_inputs(self, texts, pairs, prompt_name: str | None) -> tuple[bool, list[str], Any]:
        """``(single, texts, pairs)`` of :meth:`embed`'s and :meth:`embed_sparse`'s inputs: one
        text made a list of one (its pair too), the prompt (:meth:`prompt_text`) before each text."""
        single = isinstance(texts, str)
        prompt = self.prompt_text(prompt_name)
        texts = [prompt + t for t in ([texts] if single else texts)]
        if single and isinstance(pairs, str):
            pairs = [pairs]
        return single, texts, pairs

    def embed_sparse(
        self,
        texts: str | Sequence[str],
        pairs: Sequence[str] | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        on_overflow: str = "truncate",
        progress: bool = False,
        prompt_name: str | None = None,
    ):
        """SPLADE sparse vectors (a model with a masked-LM head): per input, the non-zero terms
        of ``max over tokens of log(1 + relu(logits))``, ``[{"index": token id, "value": weight},
        ...]`` in ascending id order; one text -> its list. The plans ``/embed_sparse`` runs
        (:meth:`sparse_plan`), so both doors give the same terms; ``prompt_name`` as :meth:`embed`."""
        if getattr(self.model, "mlm_head", None) is None:
            raise CheckpointError(f"{self.source}: the checkpoint has no masked-LM head for sparse (SPLADE) "
                                  "embeddings")
        single, texts, pairs = self._prompted_inputs(texts, pairs, prompt_name)
        encodings = self.encode(texts, pairs, max_length=max_length, on_overflow=on_overflow)
        results = self.run_plans([self.sparse_plan(enc) for enc in encodings], max_batch_size=batch_size,
                                 progress=progress, desc="embed sparse")
        return results[0] if single else results

    def features(self, ids, types, mask, layers: Sequence[int], combine: str) -> torch.Tensor:
        """(B, T, D) float32 features of a batch: the ``layers`` hidden states combined."""
        return hidden_features(self.encoder, ids, types, mask, layers, combine)

    def embed(
        self,
        texts: str | Sequence[str],
        pairs: Sequence[str] | None = None,
        layers: Sequence[int] = (-1,),
        pool: str | None = None,
        combine: str = "concat",
        batch_size: int = 32,
        max_length: int | None = None,
        on_overflow: str = "truncate",
        progress: bool = False,
        return_tokens: bool = False,
        long_text: Any = None,
        prompt_name: str | None = None,
    ):
        """Contextual features (the paper's feature-based approach, section 5.3).

        ``layers`` index the hidden states (0 = embedding output, -1 = last layer);
        ``combine`` joins them (``concat`` -> width len(layers) * H, or ``sum``). ``pool``:
        ``cls`` = the ``[CLS]`` vector, ``mean`` = mean over the sequence's tokens (specials
        included, padding excluded), ``max`` = their element-wise maximum, each returning a
        float32 array (N, D); ``none`` returns a list of (T_i, D) arrays, one per input;
        ``None`` (the default): :attr:`default_pooling`, the pooling the model was trained with. ``return_tokens`` also returns each input's
        wordpieces. ``long_text`` (a :class:`bertkit.tasks.windows.LongText`) with mode ``window``
        embeds a text longer than ``max_length`` in overlapping windows instead of truncating
        it (see :func:`bertkit.tasks.windows.embed_in_windows`). ``prompt_name``: the prompt put
        before each text (not a pair's second text): :meth:`prompt_text`, whose default is the
        model's ``default_prompt_name``.
        """
        pool = pool or self.default_pooling
        if pool not in POOLINGS:
            raise ValueError(f"pool must be one of {POOLINGS}, got {pool!r}")
        if pool == "max" and long_text is not None and long_text.windowed:
            raise ValueError("pool='max' is not available with long-text windows (cls, mean, none are)")
        if combine not in COMBINES:
            raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
        num_states = self.model.config.num_hidden_layers + 1
        layers = list(layers)
        for layer in layers:
            if not -num_states <= layer < num_states:
                raise ValueError(f"layer {layer} out of range for {num_states} hidden states (0..{num_states - 1})")
        single, texts, pairs = self._prompted_inputs(texts, pairs, prompt_name)
        if long_text is not None and long_text.windowed:
            from bertkit.inference.windows import embed_in_windows

            limit = self.token_limit(max_length)
            results, tokens = embed_in_windows(self, texts, pairs, layers, pool, combine, batch_size,
                                               limit, long_text, progress)
            if single:
                results, tokens = results[0], tokens[0]
            return (results, tokens) if return_tokens else results
        encodings = self.encode(texts, pairs, max_length=max_length, on_overflow=on_overflow)
        results: list[Any] = [None] * len(texts)
        with torch.inference_mode(), autocast(self.precision, self.device):
            for indices, ids, types, mask in self._batches(encodings, batch_size, progress, "embed"):
                if pool == "none":
                    features = self.features(ids, types, mask, layers, combine)
                    for row, index in enumerate(indices):
                        results[index] = features[row, :len(encodings[index].input_ids)].cpu().numpy()
                else:
                    pooled = pooled_vectors(self.encoder, ids, types, mask, layers, pool, combine)
                    for row, index in enumerate(indices):
                        results[index] = pooled[row].cpu().numpy()
        if pool != "none":
            width = pooled.shape[-1] if texts else 0
            results = np.stack(results) if results else np.zeros((0, width), dtype=np.float32)
            if single:
                results = results[0]
        elif single:
            results = results[0]
        if return_tokens:
            tokens = [self.tokenizer.convert_ids_to_tokens(e.input_ids) for e in encodings]
            return results, (tokens[0] if single else tokens)
        return results


def load(
    model_dir: str | Path,
    vocab: str | Path | None = None,
    lowercase: bool | None = None,
    device: str = "cpu",
    dtype: str | None = None,
    model_class: type[BertPreTrainedModel] | None = None,
    precision: str = INFERENCE_DEFAULT,
    task: Task | None = None,
    strip_accents: bool | None = None,
    compile: str = "off",
    calibration: Sequence[str | tuple[str, str]] | None = None,
    warm_up: bool = True,
) -> BertInference:
    """Load a model directory (bertkit or Hugging Face BERT, or an INT8 directory written by
    :func:`bertkit.modeldir.int8.save_int8`) ready for fill-mask / embed / predict at
    ``precision`` (:data:`bertkit.precision.INFERENCE`: ``fp32``, ``bf16``, ``fp16`` on CUDA,
    ``int8`` on the CPU, or ``auto``, the default of every door: :func:`inference_precision`).
    ``lowercase``/``strip_accents``: restate the tokenizer settings saved with the vocabulary
    (a contradiction is an error naming both). ``dtype`` is the deprecated spelling of the precision (``float32``/``bfloat16``/``float16``;
    a FutureWarning says which precision it means). ``task``: the task the caller will run
    (``bertkit evaluate``/``predict``): a float model is then built by ``task.build_model``,
    with the task's head class and its labels checked against the checkpoint's head.
    ``compile``: ``off`` (the default here), ``on`` or ``auto`` (:func:`bertkit.inference.
    compiled.decide`): the encoder runs through ``torch.compile``, its graphs built before
    this returns (``bertkit serve`` compiles under ``auto`` by default).
    ``calibration``: with ``precision="int8"``, texts (or ``(text, pair)`` tuples) of the
    model's task, at least 16 distinct, or the token rows a fine-tuned directory saved
    (:func:`bertkit.inference.calibration.saved_calibration`): the encoder then runs static INT8
    (:mod:`bertkit.inference.static_int8`, calibrated on them and compiled before this
    returns) instead of dynamic INT8. ``warm_up=False``: compiled graphs are built at the first
    forward passes (or by :meth:`BertInference.warm_up`, in the thread whose thread count their
    kernels should take: the server's).

    On the CPU this also applies :func:`bertkit.cpu.loading_for_inference`, process-wide:
    oneDNN's primitive cache is bounded (unless ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` is set;
    it takes effect only if no matrix product ran in the process before) and glibc malloc
    keeps freed memory (each batch re-allocates its activations, and page-faulting them back
    in cost BERT-Base INT8, 8 x 128 on one thread, a third of its time)."""

    if dtype is not None:
        precision = from_dtype(dtype, "dtype")
        warnings.warn(f"load(dtype=...) is deprecated: use precision={precision!r}", FutureWarning,
                      stacklevel=2)
    target = pick_device(device)
    precision, why = inference_precision(precision, target, model_dir)
    if calibration is not None:
        bert = _load_static_int8(model_dir, precision, calibration, task, vocab, lowercase, strip_accents,
                                 model_class)
        if warm_up:
            bert.warm_up()
        return bert
    with cpu.loading_for_inference(target.type == "cpu"):
        if task is not None and not is_int8_dir(model_dir):  # the task's head, checked; INT8 below if asked
            model = prepare(task.build_model(model_dir), precision)
        else:
            model = load_model(model_dir, model_class or getattr(task, "model_class", None), precision)
    tokenizer = load_tokenizer(model_dir, vocab, lowercase, strip_accents)
    bert = owning(BertInference(model, tokenizer, device=device, source=str(model_dir), precision=precision))
    bert.precision_reason = why
    if bert.compile(compile) and warm_up:
        bert.warm_up()
    family = bert.family()
    for finding in family.findings(finetune_entry(model.config).get("metrics") or {}) if family else ():
        warnings.warn(f"{model_dir}: {finding}", stacklevel=2)  # e.g. a SQuAD 2.0 model that never answers
    return bert


def owning(bert: BertInference) -> BertInference:
    """``bert`` as an engine that owns its model (loaded from a directory, never trained
    further): at fp32 its linear layers packed for few rows where this CPU class was measured
    faster (:func:`bertkit.modeldir.int8.pack_fp32`). Every engine built from a directory goes
    through here, so that they answer alike; a model a user hands to :class:`BertInference`
    is left as it is."""
    if bert.precision == "fp32":
        pack_fp32(bert.model)
    return bert


def _load_static_int8(model_dir, precision, calibration, task, vocab, lowercase, strip_accents,
                      model_class) -> BertInference:
    """:func:`load` with ``calibration``: the float model, its encoder quantised statically on
    the calibration texts (tokenised as the engine tokenises its inputs) and compiled."""
    from bertkit.inference import static_int8

    if precision != "int8" or is_int8_dir(model_dir):
        raise BertkitError("calibration is for precision int8 of a float model directory "
                           f"(this load: precision {precision}"
                           + (", an INT8 directory" if is_int8_dir(model_dir) else "") + ")")
    from bertkit.inference.calibration import CALIBRATION_FILE, encoder_rows, is_saved_rows

    with cpu.loading_for_inference(True):
        model = task.build_model(model_dir) if task is not None else load_model(model_dir, model_class, "fp32")
    bert = BertInference(model, load_tokenizer(model_dir, vocab, lowercase, strip_accents), device="cpu",
                         source=str(model_dir), precision="fp32")
    rows = encoder_rows(calibration, bert.tokenizer, bert.max_length, model.config.vocab_size)
    static_int8.quantize_static(bert.model, static_int8.calibration_batches(rows))
    source = f" (its {CALIBRATION_FILE})" if is_saved_rows(calibration) else ""
    bert.precision, bert.precision_reason = "int8", f"int8: static, calibrated on {len(calibration)} inputs{source}"
    bert.compile_reason = static_int8.describe(bert.model)
    return bert


def inference_precision(precision: str, device: torch.device | str, model_dir: str | Path,
                        option: str = "--precision") -> tuple[str, str]:
    """``(precision, why)`` a model directory runs at: the one rule of every inference door
    (``load``, ``predict``, ``evaluate``, the server). ``auto`` (and ``fp32``) on an INT8
    directory is ``int8`` (its float weights are gone); else
    :func:`bertkit.precision.resolve` for the model's width (``auto``: bf16 only where the
    CPU computes it natively and the model is wide enough to gain from it)."""
    from bertkit.checkpoint import load_config

    if is_int8_dir(model_dir) and precision in ("auto", "fp32"):
        return "int8", f"{precision}: the directory holds an INT8 model"
    return resolve(precision, device, INFERENCE, option, hidden_size=load_config(model_dir).hidden_size)
