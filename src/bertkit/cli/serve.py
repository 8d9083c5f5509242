"""Production commands: ``serve``, ``quantize``, ``export-onnx`` and ``attention``.

Heavy modules (torch, FastAPI, onnxruntime) are imported inside the handlers.
"""

from __future__ import annotations

import sys

from bertkit.errors import BertkitError
from bertkit.precision import HELP as AUTO_HELP
from bertkit.precision import INFERENCE_DEFAULT


def register(subparsers) -> None:
    """Add ``serve``, ``quantize``, ``export-onnx`` and ``attention``."""
    from bertkit.cli.long_text import add_long_text_arguments
    from bertkit.options import add_options
    from bertkit.serve.config import ServeConfig

    serve = subparsers.add_parser(
        "serve", help="serve a model over text-embeddings-inference's HTTP API (+ /fill-mask, "
                      "/attention, a page at /)",
        description="Serve MODEL_DIR over text-embeddings-inference's HTTP API (/predict, /rerank, "
                    "/embed, /embed_all, /similarity, /tokenize, /decode, /v1/embeddings, /info, "
                    "/health, /metrics) with continuous batching: the model runs whenever requests "
                    "wait, and those that arrive meanwhile share the next length-sorted batch under "
                    "a token budget; a full queue answers 429. See docs/serving.md.")
    serve.add_argument("model", metavar="MODEL_DIR", help="model directory (fine-tuned, INT8 or plain BERT)")
    add_options(serve, ServeConfig, skip=("model", "long_text"))
    add_long_text_arguments(serve)
    serve.set_defaults(func=run_serve)

    quantize = subparsers.add_parser("quantize", help="save an INT8 copy of a model directory",
                                     description="Quantise every linear layer to INT8 (dynamic) and "
                                                 "save it; load it with --precision int8 (or as is).")
    quantize.add_argument("model", metavar="MODEL_DIR")
    quantize.add_argument("--out", required=True, metavar="DIR", help="INT8 model directory to write")
    quantize.add_argument("--overwrite", action="store_true",
                          help="replace the model already in --out (default: refuse)")
    quantize.set_defaults(func=run_quantize)

    layout = subparsers.add_parser(
        "st-layout", help="add sentence-transformers' files to a model directory (pooling for TEI)",
        description="Write modules.json, 1_Pooling/config.json, sentence_bert_config.json and "
                    "config_sentence_transformers.json into MODEL_DIR, so that SentenceTransformer(MODEL_DIR) and text-embeddings-inference "
                    "embed with this pooling (bertkit serve's /embed takes it as its default).")
    layout.add_argument("model", metavar="MODEL_DIR")
    layout.add_argument("--pooling", choices=["cls", "mean", "max"],
                        help="how tokens become one vector (default: the pooling the model was fine-tuned "
                             "with; required for any other model)")
    layout.add_argument("--normalize", action="store_true", help="add a Normalize module (unit vectors)")
    layout.add_argument("--prompt", action="append", default=[], metavar="NAME=TEXT",
                        help="a prompt put before the texts embedded with prompt_name NAME (TEXT as "
                             "it is, e.g. 'query: '); repeat for several; the directory's own are kept")
    layout.add_argument("--default-prompt-name", metavar="NAME",
                        help="the prompt used when none is named (sentence-transformers' default_prompt_name)")
    layout.set_defaults(func=run_st_layout)

    export = subparsers.add_parser("export-onnx", help="export a model directory to ONNX",
                                   description="Export the encoder and its task head to ONNX with "
                                               "dynamic batch and sequence axes.")
    export.add_argument("model", metavar="MODEL_DIR")
    export.add_argument("--out", required=True, metavar="FILE.onnx", help="ONNX file to write")
    export.add_argument("--int8", action="store_true", help="quantise the graph with ONNX Runtime (dynamic INT8)")
    export.add_argument("--opset", type=int, default=17, help="ONNX opset (default 17)")
    export.set_defaults(func=run_export)

    attention = subparsers.add_parser("attention", help="one attention head as a PNG heat map")
    attention.add_argument("model", metavar="MODEL")
    attention.add_argument("text", metavar="TEXT")
    attention.add_argument("--pair", default=None, metavar="TEXT", help="second text of a pair")
    attention.add_argument("--layer", type=int, default=-1, help="layer, from 0 (default -1: the last)")
    attention.add_argument("--head", type=int, default=0, help="head, from 0 (default 0)")
    attention.add_argument("--out", default="attention.png", metavar="FILE.png", help="default attention.png")
    attention.add_argument("--precision", default=INFERENCE_DEFAULT, choices=["auto", "fp32", "bf16", "int8"],
                           help=f"fp32, bf16 autocast, int8 dynamic quantisation, or {AUTO_HELP} "
                                "(default: %(default)s, as every inference door)")
    attention.set_defaults(func=run_attention)


def run_serve(args) -> int:
    from bertkit.cli.long_text import long_text_options
    from bertkit.options import options_from_args
    from bertkit.serve.app import run
    from bertkit.serve.config import ServeConfig

    values = options_from_args(ServeConfig, args)  # model: the positional
    values["long_text"] = long_text_options(args)  # args.long_text is the --long-text flag
    config = ServeConfig(**values).check()
    from pathlib import Path

    if not (Path(args.model) / "config.json").is_file():
        raise BertkitError(f"{args.model}: not a model directory (no config.json)")
    from bertkit.modeldir.marker import check_model

    check_model(args.model)  # an unfinished run: warned on the console
    run(config)
    return 0


def run_quantize(args) -> int:
    from bertkit.finetuning.run_dir import RunDir
    from bertkit.inference import load
    from bertkit.modeldir.int8 import save_int8
    from bertkit.modeldir.marker import carry_unfinished_marker, check_model

    with RunDir(args.out, resumable=False) as out:  # the one rule for outputs, and the lock
        out.prepare(overwrite=args.overwrite, inputs={"MODEL_DIR": args.model})
        check_model(args.model)
        bert = load(args.model, precision="int8")
        save_int8(bert.model, out.staging(), tokenizer=bert.tokenizer)
        out.publish()  # as a whole: no file of another model left beside it
        carry_unfinished_marker(args.model, args.out)
    print(f"wrote INT8 {type(bert.model).__name__} to {args.out}", file=sys.stderr)
    return 0


def run_st_layout(args) -> int:
    from bertkit.inference import load
    from bertkit.modeldir.st_layout import read_st_pooling, write_st_layout

    prompts = {}
    for given in args.prompt:
        name, sep, text = given.partition("=")
        if not sep or not name:
            raise BertkitError(f"--prompt must be NAME=TEXT, got {given!r}")
        prompts[name] = text
    bert = load(args.model)
    write_st_layout(args.model, args.pooling, bert.model.config.hidden_size, bert.max_length, args.normalize,
                    prompts, args.default_prompt_name)
    print(f"wrote sentence-transformers' files ({read_st_pooling(args.model)} pooling) into {args.model}",
          file=sys.stderr)
    return 0


def run_export(args) -> int:
    import logging

    from bertkit.fileio import check_not_input, check_writable
    from bertkit.inference.export import export_onnx
    from bertkit.modeldir.marker import check_model

    check_writable(args.out, "--out ONNX file")  # before the export runs
    check_not_input(args.out, args.model, "--out", "MODEL_DIR")  # never over the model's files
    check_model(args.model)
    logging.disable(logging.WARNING)  # onnxruntime's quantiser advice goes to the root logger
    try:
        path = export_onnx(args.model, args.out, int8=args.int8, opset=args.opset)
    finally:
        logging.disable(logging.NOTSET)
    print(f"wrote {'INT8 ' if args.int8 else ''}ONNX graph to {path}", file=sys.stderr)
    return 0


def run_attention(args) -> int:
    from bertkit.errors import InputError
    from bertkit.inference import load
    from bertkit.modeldir.marker import check_model
    from bertkit.plot import plot_attention

    check_model(args.model)
    bert = load(args.model, precision=args.precision)
    try:
        tokens, matrix = bert.attention(args.text, args.layer, args.head, pair=args.pair,
                                        on_overflow="truncate")  # cut with a warning, as predict
    except InputError as e:
        raise BertkitError(str(e)) from None
    layer = args.layer % bert.model.config.num_hidden_layers
    plot_attention(tokens, matrix, args.out, title=f"layer {layer}, head {args.head}")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
