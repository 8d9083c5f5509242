"""The configuration of one ``bertkit serve`` process (every CLI flag is a field)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field

from bertkit.config import UNPAD_MODES
from bertkit.errors import OptionError
from bertkit.inference.calibration import has_saved_calibration
from bertkit.model.pooling import SERVED_POOLINGS
from bertkit.options import check_config, option
from bertkit.precision import (
    CALIBRATION_HELP,
    COMPILE_HELP,
    COMPILE_MODES,
    INFERENCE_DEFAULT,
    RUNTIMES,
    check_calibration,
)
from bertkit.precision import HELP as PRECISION_HELP
from bertkit.precision import INFERENCE as INFERENCE_PRECISIONS

ENV_VAR = "BERTKIT_SERVE_CONFIG"  # how --workers hands the config to each worker process


API_KEY_ENV = "BERTKIT_API_KEY"
ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s,]+")


@dataclass
class ServeConfig:
    """Everything ``bertkit serve`` needs; each field declares its flag (``bertkit.options``)."""

    model: str = ""
    precision: str = option(INFERENCE_DEFAULT, f"fp32, bf16/fp16 autocast, int8 dynamic quantisation "
                                               f"(CPU), or {PRECISION_HELP}; the default of every "
                                               "inference door", choices=INFERENCE_PRECISIONS)
    compile: str = option("auto", f"{COMPILE_HELP}; the server answers at once on the eager model "
                                  "while the graphs build in the background (BERT-Base: about a minute; "
                                  "/info says compiling)", choices=COMPILE_MODES)
    device: str = option("cpu", "cpu or cuda")
    runtime: str = option("torch", "torch (bertkit's PyTorch engine), openvino (pip install "
                                   "'bertkit[openvino]'; CPU; the task-head routes run on OpenVINO at "
                                   "--precision fp32, bf16 where native, or int8 by NNCF static "
                                   "quantisation on --calibration; the other routes on PyTorch fp32) "
                                   "or auto (the task-head routes on OpenVINO where it was measured "
                                   "faster than PyTorch at the precision the model runs at: bf16 on "
                                   "the AMX Xeon; the other routes on PyTorch at that precision; "
                                   "elsewhere torch; the start-up line says which and why)",
                          choices=RUNTIMES)
    calibration: str | None = option(None, CALIBRATION_HELP, metavar="FILE")
    pooling: str | None = option(None, "how an embedding model's tokens become one vector on /embed, "
                                       "/similarity and /v1/embeddings (TEI's --pooling): cls, mean, max, "
                                       "or splade (a masked-LM model's SPLADE vector over the vocabulary; "
                                       "/embed_all and normalize refused, as TEI) (default: the "
                                       "directory's sentence-transformers pooling, else cls)",
                                 choices=SERVED_POOLINGS)
    host: str = option("127.0.0.1", "address to bind (127.0.0.1: this machine only)")
    port: int = option(8000, "port", ge=0, le=65535)
    workers: int = option(1, "worker processes, each with its own model copy and batcher", ge=1)
    threads: int | None = option(None, "torch CPU threads per worker (default: torch's)", ge=1)
    attention_impl: str = option("auto", "a batch of requests of different lengths: unpadded (only "
                                         "the real tokens computed; the same answers, less work), "
                                         "padded, or auto (unpadded on the eager PyTorch route in fp32; "
                                         "bf16, INT8, compiled graphs and OpenVINO stay padded)",
                                 choices=UNPAD_MODES)
    access_log: bool = option(True, "a log line per request on stderr (uvicorn's access log); "
                                    "--no-access-log spares its cost at high request rates")
    model_process: bool = option(False, "run the forward passes in a process of their own, so that "
                                        "they and the HTTP work do not take turns at one Python "
                                        "interpreter lock (BERT-Tiny at concurrency 32: 1.2-1.5x the requests/s "
                                        "of one process over HTTP, five runs on AMX and VNNI Xeons; "
                                        "docs/serving-results.md); needs two cores; the model is loaded in "
                                        "both processes")
    max_batch_tokens: int = option(8192, "padded tokens (rows x longest row) per forward pass",
                                   ge=1, metavar="N")
    max_batch_size: int = option(64, "inputs per forward pass", ge=1, metavar="N")
    max_queue: int = option(1024, "model rows queued at most (TEI's max_concurrent_requests); "
                                  "beyond, 429 Overloaded; a request that needs more, 413",
                            ge=1, metavar="N")
    max_items: int = option(64, "inputs per request at most (TEI's max_client_batch_size); "
                                "beyond, 422 as TEI", ge=1, metavar="N")
    max_answer_values: int = option(8_388_608, "numbers one answer may hold (/embed_all: each input's "
                                                "tokens x hidden size): a request asking for more is "
                                                "refused 413 before its forward pass", ge=1, metavar="N")
    truncate: bool = option(True, "over-long inputs: truncate and name them in the "
                                  "X-Bertkit-Truncated header (--no-truncate: answer 413); a "
                                  "request's own \"truncate\" field wins (TEI's --auto-truncate)")
    api_key: str | None = option(None, "require the header 'Authorization: Bearer KEY' on the "
                                       "model routes (/health, /metrics, /docs and the page stay open); "
                                       f"visible to other users in ps: prefer ${API_KEY_ENV} or "
                                       "--api-key-file", metavar="KEY")
    api_key_file: str | None = option(None, "read the API key from the first line of FILE", metavar="FILE")
    cors_allow_origin: str | None = option(None, "origins allowed to call the API from a browser, "
                                                 "comma-separated (default: any, as TEI)",
                                           metavar="ORIGINS")
    payload_limit: int = option(2_000_000, "request bodies larger than this many bytes: 413",
                                ge=1, metavar="BYTES")
    max_connections: int = option(1024, "connections open at once; a further one is answered 503 "
                                        "and closed (fewer where the open-file limit is lower, "
                                        "said at start)", ge=1, metavar="N")
    max_client_connections: int | None = option(
        None, "connections one client address may hold; a further one is answered 503 and "
              "closed, so one client cannot starve the rest (default: a quarter of "
              "--max-connections; raise it behind a reverse proxy, whose address every "
              "client shares)", ge=1, metavar="N")
    request_timeout: float = option(30.0, "seconds a request may take to arrive whole, head and "
                                          "body, from its first byte; beyond, 408 (slow clients)",
                                    gt=0, metavar="S")
    keep_alive_timeout: float = option(5.0, "seconds a connection may stay idle, before its first "
                                            "request as between two; then closed", gt=0, metavar="S")
    # --long-text / --stride / --pool-windows (declared in bertkit.cli.long_text, not here):
    # the task options they set; the model's saved choice fills what is absent
    long_text: dict = field(default_factory=dict)

    def check(self) -> ServeConfig:
        """``self``, or a :class:`BertkitError` naming the first bad option."""
        check_config(self, "serve")
        self.key()
        self.origins()
        if self.runtime == "openvino":
            if self.device != "cpu":
                raise OptionError("serve: --runtime openvino runs on the CPU (--device cpu)")
            if self.precision == "fp16":
                raise OptionError("serve: --runtime openvino takes --precision fp32, bf16, int8 or auto")
            if self.precision == "int8" and not self.calibration and not has_saved_calibration(self.model):
                raise OptionError("serve: --runtime openvino --precision int8 needs --calibration FILE "
                                  "(a few hundred inputs of the model's task: its static INT8 fixes "
                                  "activation scales from them), or a model directory that saved its "
                                  "training inputs (bertkit finetune writes calibration.jsonl)")
        check_calibration(self.calibration, self.precision, "serve")
        return self

    def key(self) -> str | None:
        """The API key: ``--api-key``, else ``--api-key-file``'s first line, else ``$BERTKIT_API_KEY``;
        None for an open server. Fails closed: an empty key (an unset ``$KEY`` on the command
        line, an empty file or variable) is an :class:`OptionError`, never an open server."""
        given = [(flag, value) for flag, value in (("--api-key", self.api_key),
                                                   ("--api-key-file", self.api_key_file)) if value is not None]
        if len(given) > 1:
            raise OptionError("serve: give one of --api-key and --api-key-file")
        if self.api_key is not None:
            key, where = self.api_key, "--api-key"
        elif self.api_key_file is not None:
            key, where = _first_line(self.api_key_file), f"--api-key-file {self.api_key_file}"
        elif API_KEY_ENV in os.environ:
            key, where = os.environ[API_KEY_ENV], f"${API_KEY_ENV}"
        else:
            return None
        if not key.strip():
            raise OptionError(f"serve: {where} is empty (an unset variable?): give a key, or leave "
                              "it out for a server open to anyone who can reach it")
        return key.strip()

    def origins(self) -> list[str]:
        """The CORS origins: ``*`` (any, TEI's default) or each ``scheme://host[:port]``, a
        trailing slash dropped (browsers send none); an empty or malformed one is an
        :class:`OptionError` (an empty list would let every origin in, a path none)."""
        if self.cors_allow_origin is None:
            return ["*"]
        origins = [o.strip().rstrip("/") for o in self.cors_allow_origin.split(",")]
        bad = next((o for o in origins if o != "*" and not ORIGIN.fullmatch(o)), None)
        if not self.cors_allow_origin.strip() or bad is not None:
            raise OptionError(f"serve: --cors-allow-origin: {bad!r} is not an origin: give "
                              "scheme://host[:port] (e.g. https://example.org), comma-separated, or *"
                              if bad else "serve: --cors-allow-origin is empty (an unset variable?): "
                                          "give origins, or leave it out to allow any (*)")
        return origins

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        return cls(**json.loads(text))


def _first_line(path: str) -> str:
    """The first line of a small file (at most 4 KiB read), or an OptionError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(4096).partition("\n")[0]
    except (OSError, UnicodeDecodeError) as e:
        raise OptionError(f"serve: --api-key-file {path}: cannot read it ({e})") from None
