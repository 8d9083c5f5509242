"""Model commands: ``fill-mask``, ``embed``, ``convert``, ``info``.

Heavy modules (torch, the model) are imported inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bertkit.cli.long_text import add_long_text_arguments, check_window_flags, long_text_options
from bertkit.cli.parsing import (
    accept_negative_lists,
    add_calibration_flag,
    add_compile_flag,
    add_progress_flag,
)
from bertkit.errors import BertkitError
from bertkit.options import bounded
from bertkit.precision import DTYPE_PRECISIONS, INFERENCE_DEFAULT, from_dtype
from bertkit.precision import HELP as PRECISION_HELP
from bertkit.precision import INFERENCE as INFERENCE_PRECISIONS
from bertkit.tokenizer.settings import add_tokenizer_flags


def _add_loading_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model directory (bertkit or Hugging Face BERT)")
    parser.add_argument("--vocab", help="vocab.txt to use when MODEL has none")
    add_tokenizer_flags(parser)  # checked against the settings saved with the vocabulary
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--precision", default=INFERENCE_DEFAULT, choices=INFERENCE_PRECISIONS,
                        help=f"fp32, bf16/fp16 autocast, int8 dynamic quantisation (CPU), or "
                             f"{PRECISION_HELP} (default: %(default)s, as every inference door)")
    parser.add_argument("--dtype", default=None, choices=list(DTYPE_PRECISIONS),
                        help="deprecated: use --precision (float32 = fp32, bfloat16 = bf16, float16 = fp16)")
    add_compile_flag(parser)
    add_calibration_flag(parser)
    parser.add_argument("--batch-size", type=bounded(int, ge=1), default=32, help="inputs per forward pass")
    parser.add_argument("--max-length", type=bounded(int, ge=2), default=None,
                        help="token limit per input (default: the model's max_position_embeddings)")
    parser.add_argument("--on-overflow", choices=["truncate", "error"], default="truncate",
                        help="longer inputs: truncate with a warning (default) or fail")
    add_progress_flag(parser)



def register(subparsers) -> None:
    fill = subparsers.add_parser("fill-mask", help="predict the tokens behind [MASK]")
    _add_loading_options(fill)
    fill.add_argument("text", nargs="*", help='text with one or more [MASK], e.g. "the man went to the [MASK] ."')
    fill.add_argument("--input", help="file with one text per line (instead of TEXT)")
    fill.add_argument("--top-k", type=bounded(int, ge=1), default=5, help="predictions shown per [MASK]")
    fill.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    fill.set_defaults(func=run_fill_mask)

    embed = subparsers.add_parser("embed", help="contextual features (feature-based BERT) to .npy or .jsonl")
    _add_loading_options(embed)
    embed.add_argument("--input", required=True,
                       help="text file (one input per line) or TSV when --text-column is given")
    embed.add_argument("--output", required=True, help="FILE.npy (pooled) or FILE.jsonl")
    embed.add_argument("--text-column", help="TSV column (header name, or 0-based index for no header)")
    embed.add_argument("--pair-column", help="TSV column of the second sentence of a pair")
    embed.add_argument("--layers", default="-1", help="comma-separated hidden-state indexes, e.g. -1,-2,-3,-4")
    embed.add_argument("--pool", choices=["cls", "mean", "max", "none"], default=None,
                       help="one vector per input ([CLS], mean or max of the tokens), or one per token "
                            "(default: the pooling the model was trained with, else cls)")
    embed.add_argument("--combine", choices=["concat", "sum"], default="concat",
                       help="how to join several --layers")
    embed.add_argument("--sparse", action="store_true",
                       help="SPLADE sparse vectors from the masked-LM head instead (a .jsonl: each input's "
                            "non-zero terms {index, token, value}, ascending index, as the server's "
                            "/embed_sparse); not with --pool, --layers, --combine or --long-text window")
    embed.add_argument("--prompt-name", metavar="NAME",
                       help="put the model's sentence-transformers prompt NAME before each text "
                            "(default: its default_prompt_name's prompt, if it has one)")
    add_long_text_arguments(embed)
    embed.set_defaults(func=run_embed)
    accept_negative_lists(embed)

    convert = subparsers.add_parser("convert", help="copy a BERT directory into a bertkit/HF model directory")
    convert.add_argument("source", help="a BERT directory (e.g. Hugging Face, legacy names, .bin)")
    convert.add_argument("target", help="directory to write (config.json, model.safetensors, vocab.txt)")
    convert.add_argument("--vocab", help="vocab.txt to use when SOURCE has none")
    convert.add_argument("--model-class", help="e.g. BertForMaskedLM (default: from the config)")
    convert.add_argument("--overwrite", action="store_true",
                         help="replace the model already in TARGET (default: refuse)")
    convert.set_defaults(func=run_convert)

    info = subparsers.add_parser("info", help="shape and parameter count of a model directory or preset")
    info.add_argument("model", metavar="MODEL|PRESET", help="model directory, or tiny/mini/small/medium/base/large")
    info.set_defaults(func=run_info)


def _load(args):
    from bertkit.inference import load
    from bertkit.modeldir.marker import check_model

    check_model(args.model)

    precision = args.precision
    if args.dtype is not None:
        precision = from_dtype(args.dtype)
        print(f"bertkit: warning: --dtype is deprecated: use --precision {precision}", file=sys.stderr)
    from bertkit.inference.calibration import calibration_option

    calibration = calibration_option(args.calibration, precision, args.command, args.model)
    return load(args.model, vocab=args.vocab, lowercase=args.lowercase, device=args.device,
                precision=precision, strip_accents=args.strip_accents, compile=args.compile,
                calibration=calibration)


def _text_lines(path: str) -> list[str]:
    """The lines of ``path`` that hold text (blank ones, also those left with nothing once the
    tokenizer drops control and zero-width characters, are skipped)."""
    from bertkit.fileio import read_lines
    from bertkit.tokenizer.basic import is_blank

    return [line for _, line in read_lines(path) if not is_blank(line)]


def run_fill_mask(args) -> int:
    texts = list(args.text)
    if args.input:
        texts += _text_lines(args.input)
    if not texts:
        raise BertkitError("fill-mask needs TEXT or --input FILE")
    bert = _load(args)
    results = bert.fill_mask(texts, top_k=args.top_k, batch_size=args.batch_size,
                             max_length=args.max_length, on_overflow=args.on_overflow,
                             progress=args.progress if args.input else False)
    for text, masks in zip(texts, results):
        if args.json:
            print(json.dumps({"text": text, "masks": masks}, ensure_ascii=False))
            continue
        print(text)
        for number, candidates in enumerate(masks, start=1):
            label = f"[MASK] {number}" if len(masks) > 1 else "[MASK]"
            print(f"  {label}")
            for rank, c in enumerate(candidates, start=1):
                print(f"    {rank:2d}. {c['token_str']:<20} {c['score']:.4f}")
    return 0


def read_inputs(path: str, text_column: str | None, pair_column: str | None):
    """Texts (and pairs) from a plain text file or, when a column is given, a TSV file.

    Columns given by name use the first line as header; by integer index, there is none.
    """
    from bertkit.errors import DataFormatError
    from bertkit.fileio import read_lines

    if text_column is None and pair_column is None:
        return _text_lines(path), None
    text_column = text_column if text_column is not None else "0"
    by_index = text_column.isdigit() and (pair_column is None or pair_column.isdigit())
    rows = [(n, line.split("\t")) for n, line in read_lines(path) if line.strip()]
    if not rows:
        return [], None
    if by_index:
        a, b = int(text_column), int(pair_column) if pair_column is not None else None
    else:
        header = rows.pop(0)[1]
        try:
            a = header.index(text_column)
            b = header.index(pair_column) if pair_column is not None else None
        except ValueError:
            raise DataFormatError(path, f"header has no column {text_column!r}/{pair_column!r}: {header}", 1) from None
    texts, pairs = [], [] if b is not None else None
    for number, cells in rows:
        if max(a, b or 0) >= len(cells):
            raise DataFormatError(path, f"{len(cells)} columns, column {max(a, b or 0)} requested", number)
        texts.append(cells[a])
        if pairs is not None:
            pairs.append(cells[b])
    return texts, pairs


def run_embed(args) -> int:
    import numpy as np

    from bertkit.fileio import atomic_path, atomic_write, check_not_input, check_writable

    try:
        layers = [int(x) for x in args.layers.split(",") if x.strip()]
    except ValueError:
        raise BertkitError(f"--layers must be comma-separated integers, got {args.layers!r}") from None
    output = Path(args.output)
    if output.suffix not in (".npy", ".jsonl"):
        raise BertkitError(f"--output must end in .npy or .jsonl, got {output.name}")
    if output.suffix == ".npy" and args.pool == "none":
        raise BertkitError("--pool none gives one array per input; write it to a .jsonl file")
    if args.sparse:
        _check_sparse_flags(args, output)
    check_writable(output, "--output")
    check_not_input(output, args.input)
    check_window_flags(args, long_text_options(args))
    texts, pairs = read_inputs(args.input, args.text_column, args.pair_column)
    bert = _load(args)
    if args.sparse:
        return _write_sparse(bert, args, texts, pairs, output)
    from bertkit.tasks.windows import LongText
    from bertkit.tokenizer.unknown import unknown_report, warn_unknown

    warn_unknown(unknown_report(bert.tokenizer, [*texts[:2000], *(pairs or [])[:2000]]), "the input texts")

    try:
        features, tokens = bert.embed(texts, pairs, layers=layers, pool=args.pool, combine=args.combine,
                                      batch_size=args.batch_size, max_length=args.max_length,
                                      on_overflow=args.on_overflow, progress=args.progress,
                                      return_tokens=True, prompt_name=args.prompt_name,
                                      long_text=LongText.from_options(long_text_options(args)))
    except ValueError as e:
        raise BertkitError(str(e)) from None
    if output.suffix == ".npy":
        with atomic_path(output) as tmp, open(tmp, "wb") as f:
            np.save(f, features)
    else:
        with atomic_write(output) as f:
            for i, vector in enumerate(features):
                record = {"index": i, "text": texts[i]}
                if pairs is not None:
                    record["pair"] = pairs[i]
                if args.pool == "none":
                    record["tokens"] = tokens[i]
                record["features"] = np.round(vector, 6).tolist()
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
    width = features[0].shape[-1] if len(features) else 0
    print(f"wrote {len(texts)} inputs x {width} features to {output}", file=sys.stderr)
    return 0


def _check_sparse_flags(args, output: Path) -> None:
    """``embed --sparse``: a BertkitError naming any flag it cannot honour."""
    from bertkit.tasks.windows import LongText

    if output.suffix != ".jsonl":
        raise BertkitError(f"--sparse writes each input's terms to a .jsonl file, not {output.name}")
    given = [flag for flag, on in (("--pool", args.pool is not None), ("--layers", args.layers.strip() != "-1"),
                                   ("--combine", args.combine != "concat"),
                                   ("--long-text window", LongText.from_options(long_text_options(args)).windowed))
             if on]
    if given:
        raise BertkitError(f"--sparse is the masked-LM head's SPLADE vector over the last layer: "
                           f"{', '.join(given)} cannot apply to it; leave {'them' if len(given) > 1 else 'it'} out")


def _write_sparse(bert, args, texts: list[str], pairs: list[str] | None, output: Path) -> int:
    """``embed --sparse``'s JSONL: per input its text (and pair) and non-zero SPLADE terms."""
    from bertkit.fileio import atomic_write

    vectors = bert.embed_sparse(texts, pairs, batch_size=args.batch_size, max_length=args.max_length,
                                on_overflow=args.on_overflow, progress=args.progress, prompt_name=args.prompt_name)
    with atomic_write(output) as f:
        for i, terms in enumerate(vectors):
            names = bert.tokenizer.convert_ids_to_tokens([t["index"] for t in terms])
            record = {"index": i, "text": texts[i], **({"pair": pairs[i]} if pairs is not None else {}),
                      "sparse": [{"index": t["index"], "token": name, "value": round(t["value"], 6)}
                                 for t, name in zip(terms, names)]}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    mean = sum(len(v) for v in vectors) / max(len(vectors), 1)
    print(f"wrote {len(texts)} inputs' sparse vectors ({mean:.0f} non-zero terms each on average, of "
          f"{bert.model.config.vocab_size:,}) to {output}", file=sys.stderr)
    return 0


def run_convert(args) -> int:
    from bertkit.checkpoint import (
        check_vocabulary,
        load_pretrained,
        load_tokenizer,
        save_pretrained,
    )
    from bertkit.model import TASK_MODELS

    model_class = None
    if args.model_class:
        if args.model_class not in TASK_MODELS:
            raise BertkitError(f"unknown --model-class {args.model_class}; choose from {', '.join(TASK_MODELS)}")
        model_class = TASK_MODELS[args.model_class]
    from bertkit.finetuning.run_dir import RunDir

    with RunDir(args.target, "TARGET", resumable=False) as target:  # the one rule for outputs
        target.prepare(overwrite=args.overwrite, inputs={"SOURCE": args.source, "--vocab": args.vocab})
        model = load_pretrained(args.source, model_class)
        tokenizer = load_tokenizer(args.source, args.vocab)
        check_vocabulary(tokenizer, model.config.vocab_size, args.source)
        save_pretrained(model, target.staging(), tokenizer=tokenizer)
        target.publish()  # as a whole: no file of another model left beside it
    print(f"wrote {type(model).__name__} ({model.num_parameters():,} parameters) to {args.target}")
    return 0


def run_info(args) -> int:
    from bertkit.checkpoint import load_config
    from bertkit.config import PRESETS, BertConfig

    config = BertConfig.preset(args.model) if args.model in PRESETS and not Path(args.model).exists() \
        else load_config(args.model)
    print(f"{args.model}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
          f"{config.num_attention_heads} heads, intermediate {config.intermediate_size}, "
          f"vocab {config.vocab_size}, max positions {config.max_position_embeddings}, "
          f"attention {config.attention}")
    total = config.num_parameters()
    paper = {"base": "110M", "large": "340M"}.get(args.model)
    note = f"; the paper reports {paper}" if paper else ""
    print(f"parameters (embeddings + encoder + pooler): {total:,} ({total / 1e6:.1f}M{note})")
    if args.model in PRESETS and not Path(args.model).exists():
        print(f"(a preset: vocab {config.vocab_size:,} is BERT's uncased vocabulary; "
              "pretrain --model-size takes the vocabulary size from --vocab)")
    return 0
