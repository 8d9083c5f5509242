"""``create_pretraining_data``: corpus text in, sharded pre-training instances out.

The corpus's documents are shuffled (as BERT's script does; ``shuffle_documents``), read as
a stream and grouped into chunks of documents
(:func:`~bertkit.pretraining.documents.iter_chunks`). Each chunk is tokenized, packed into
instances (``dupe_factor`` passes, NotNext B from another document of the same chunk),
shuffled and (static masking) masked with generators seeded from ``(seed, chunk index)``
alone; chunks run on ``workers`` processes and are written in chunk order. The output is
therefore byte-identical for a given seed and corpus whatever the number of workers, and
memory holds only a few chunks at a time.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import multiprocessing
import os
import random
import signal
import sys
import threading
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from bertkit.errors import BertkitError, DataFormatError
from bertkit.fileio import atomic_write
from bertkit.pretraining.data_config import CreationSettings
from bertkit.pretraining.documents import Chunk, iter_chunks, iter_documents
from bertkit.pretraining.instances import instances_from_document
from bertkit.pretraining.masking import VocabInfo, mask_batch
from bertkit.pretraining.shards import (
    FORMAT,
    FORMAT_VERSION,
    META_NAME,
    MLM_FIELDS,
    STATIC_FIELDS,
    VOCAB_INFO_NAME,
    ShardWriter,
    remove_stale_files,
    write_meta,
)
from bertkit.runlog import bar_disabled
from bertkit.tokenizer.unknown import (
    REFUSE_RATE,
    WARN_RATE,
    UnknownReport,
    unknown_report,
    warn_unknown,
)

MASK_BLOCK = 4096  # rows masked at once (part of the output's definition: keep it fixed)
STAT_KEYS = ("documents", "sentences", "instances", "tokens", "is_next", "predictions", "candidates",
             "text_tokens", "unknown")
PROBE_LINES = 2000  # lines of the corpus tokenized first, to refuse a mismatched vocabulary early


@dataclass
class _Job:
    """What a worker needs besides the chunk (picklable)."""

    settings: CreationSettings
    vocab_file: str
    ids_dtype: str
    special_ids: dict = field(default_factory=dict)


_TOKENIZERS: dict = {}


def _tokenizer(vocab_file: str, settings: CreationSettings):
    """One tokenizer per process, vocabulary and normaliser settings (workers build theirs
    on first use); the settings saved with the vocabulary fill those left ``None``."""
    key = (vocab_file, settings.lowercase, settings.strip_accents, settings.google_tokenizer)
    if key not in _TOKENIZERS:
        from bertkit.tokenizer import BertTokenizer

        _TOKENIZERS[key] = BertTokenizer.from_file(
            vocab_file, lowercase=settings.lowercase, strip_accents=settings.strip_accents,
            google_compat=settings.google_tokenizer)
    return _TOKENIZERS[key]


@functools.lru_cache(maxsize=4)
def _vocab_info(vocab_file: str) -> VocabInfo:
    from bertkit.tokenizer import Vocab

    return VocabInfo.from_tokens(Vocab.from_file(vocab_file).tokens)


def process_chunk(chunk: Chunk, job: _Job) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Tokenize, pack (``dupe_factor`` passes), shuffle and (static) mask one chunk.

    Returns ``(rows, statistics)``: the chunk's instances as arrays (see ``shards``) in a
    random order, and counts for the summary.

    A pure function of the chunk, its index and the settings.
    """
    s = job.settings
    tok = _tokenizer(job.vocab_file, s)
    documents = []
    for text_document in chunk.documents:
        document = [ids for ids in map(tok.text_to_ids, text_document) if ids]
        if document:
            documents.append(document)
    stats = dict.fromkeys(STAT_KEYS, 0)
    stats["documents"] = len(documents)
    stats["text_tokens"] = sum(len(ids) for document in documents for ids in document)
    stats["unknown"] = sum(ids.count(tok.unk_token_id) for document in documents for ids in document)
    stats["sentences"] = sum(len(d) for d in documents)
    if len(documents) < 2:
        return {}, stats  # the caller reports it: the corpus has fewer than two documents

    seeds = np.random.SeedSequence([s.seed, chunk.index]).generate_state(4)
    rng = random.Random(int.from_bytes(seeds.tobytes(), "little"))
    passes = []  # one pass per dupe, laid out as compact arrays right away
    for _ in range(s.dupe_factor):
        instances = [
            instance
            for index in range(len(documents))
            for instance in instances_from_document(documents, index, s.max_seq_length, s.short_seq_prob, rng)
        ]
        passes.append(_rows(instances, job))
    order = list(range(sum(len(p["lengths"]) for p in passes)))
    rng.shuffle(order)
    rows = {key: np.concatenate([p[key] for p in passes])[order] for key in passes[0]}
    stats["instances"] = len(order)
    stats["tokens"] = int(rows["lengths"].sum())
    stats["is_next"] = int((rows["next_sentence_label"] == 0).sum())
    special = _vocab_info(job.vocab_file).special
    stats["candidates"] = int((~special[rows["input_ids"]]).sum())
    if not s.dynamic_masking:
        _mask_rows(rows, chunk.index, job)
        stats["predictions"] = int((rows["mlm_positions"] >= 0).sum())
    return rows, stats


def _rows(instances, job: _Job) -> dict[str, np.ndarray]:
    """Lay instances out as padded ``[CLS] A [SEP] B [SEP]`` arrays."""
    T, ids = job.settings.max_seq_length, job.special_ids
    n = len(instances)
    input_ids = np.full((n, T), ids["pad"], dtype=job.ids_dtype)
    lengths = np.empty(n, dtype=np.int32)
    b_starts = np.empty(n, dtype=np.int32)
    labels = np.empty(n, dtype=np.int8)
    cls, sep = ids["cls"], ids["sep"]
    for row, inst in enumerate(instances):
        sequence = [cls, *inst.tokens_a, sep, *inst.tokens_b, sep]
        input_ids[row, : len(sequence)] = sequence
        lengths[row] = len(sequence)
        b_starts[row] = len(inst.tokens_a) + 2
        labels[row] = 1 if inst.is_random_next else 0
    return {"input_ids": input_ids, "lengths": lengths, "b_starts": b_starts, "next_sentence_label": labels}


def _mask_rows(rows: dict[str, np.ndarray], chunk_index: int, job: _Job) -> None:
    """Static masking in place; adds ``mlm_positions`` / ``mlm_ids``."""
    s = job.settings
    info = _vocab_info(job.vocab_file)
    rng = np.random.default_rng([s.seed, chunk_index, 1])
    blocks = [  # blocks of rows bound the temporary (rows, T) arrays of the sort
        mask_batch(rows["input_ids"][start : start + MASK_BLOCK], info, s.masking, rng)
        for start in range(0, len(rows["input_ids"]), MASK_BLOCK)
    ]
    rows["input_ids"] = np.concatenate([b[0] for b in blocks])
    positions = np.concatenate([b[1] for b in blocks])
    rows["mlm_positions"] = positions.astype(np.int16 if s.max_seq_length <= 32767 else np.int32)
    rows["mlm_ids"] = np.concatenate([b[2] for b in blocks])


def _results(chunks, job: _Job, workers: int):
    """Chunk results in chunk order; at most ``2 * workers`` chunks in flight."""
    if workers <= 1:
        for chunk in chunks:
            yield process_chunk(chunk, job)
        return
    # An executor, not a Pool: when a worker dies (killed, out of memory) a Pool starts a new one
    # and waits forever for the lost chunk; the executor fails every pending result instead.
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(),
                               initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        window: deque = deque()
        for chunk in chunks:
            window.append(pool.submit(process_chunk, chunk, job))
            if len(window) >= 2 * workers:
                yield _chunk_result(window.popleft())
        while window:
            yield _chunk_result(window.popleft())
    finally:
        _stop_pool(pool)


PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_S = 1.0


def die_with_parent(parent: int) -> None:
    """Worker start-up: never outlive the process that started the pool (``parent``), even when
    it is killed with SIGKILL and cannot stop its workers. On Linux the kernel sends the worker
    SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon thread
    watches the parent id as well (a worker whose parent died is re-parented), and a parent
    that died before this ran ends the worker at once."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watch below still holds
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="bertkit-parent-watch", daemon=True).start()


def _chunk_result(future):
    try:
        return future.result()
    except BrokenProcessPool:
        raise BertkitError(
            "a pretrain-data worker process died (killed, or out of memory?); the other workers "
            "were stopped and no meta.json was written: run the command again, with fewer "
            "--workers or a smaller --chunk-sentences if memory is short") from None


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Shut ``pool`` down now: pending chunks cancelled, running workers terminated."""
    processes = list(getattr(pool, "_processes", {}).values())  # before shutdown forgets them
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=10)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def create_pretraining_data(
    inputs: list[str | Path],
    vocab_file: str | Path,
    output_dir: str | Path,
    settings: CreationSettings | None = None,
    *,
    workers: int = 1,
    shard_size: int = 100_000,
    progress: bool | None = None,
    allow_unknown: bool = False,
) -> dict:
    """Write pre-training data for ``inputs`` into ``output_dir``; return the ``meta.json`` dict.

    ``meta["summary"]`` holds documents, sentences, instances, tokens, the IsNext share and
    the masked share (predictions / non-special tokens; None with dynamic masking).
    Raises :class:`~bertkit.errors.DataFormatError` for an empty corpus, a corpus of one
    document or undecodable input (file and line named). An existing ``meta.json`` in
    ``output_dir`` is removed first, so an interrupted run never leaves a directory that
    reads as finished.

    The vocabulary is checked first on the corpus's first :data:`PROBE_LINES` lines: more than
    :data:`~bertkit.tokenizer.unknown.REFUSE_RATE` of ``[UNK]`` tokens stops the run with the
    likely cause, unless ``allow_unknown``. ``meta["summary"]["unknown_share"]`` is the share
    over the whole corpus; above :data:`~bertkit.tokenizer.unknown.WARN_RATE` it is warned
    about (``UserWarning``) with ``meta["summary"]["unknown_cause"]``.
    """
    settings = settings or CreationSettings()
    inputs = [Path(p) for p in inputs]
    if not inputs:
        raise BertkitError("no input files given")
    for path in inputs:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file")
    vocab_file = Path(vocab_file)
    _TOKENIZERS.clear()  # the vocabulary file may have changed since an earlier call
    _vocab_info.cache_clear()
    tok = _tokenizer(str(vocab_file), settings)
    # the values used, as saved with the vocabulary or given, are what meta.json records
    settings = dataclasses.replace(settings, lowercase=tok.lowercase, strip_accents=tok.strip_accents)
    try:
        info = _vocab_info(str(vocab_file))
    except ValueError as e:
        raise DataFormatError(vocab_file, str(e)) from None
    probe = _probe_unknown(tok, inputs, allow_unknown)
    job = _Job(
        settings,
        str(vocab_file),
        "uint16" if len(tok) <= 1 << 16 else "int32",
        {"pad": tok.pad_token_id, "cls": tok.cls_token_id, "sep": tok.sep_token_id},
    )
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    (output / META_NAME).unlink(missing_ok=True)
    for leftover in output.glob(".shard-*.tmp"):  # from a run that was killed outright
        leftover.unlink()

    fields = STATIC_FIELDS + (() if settings.dynamic_masking else MLM_FIELDS)
    writer = ShardWriter(output, shard_size, fields)
    totals = dict.fromkeys(STAT_KEYS, 0)
    documents = iter_documents(inputs, settings.split_sentences,
                               shuffle_seed=settings.seed if settings.shuffle_documents else None)
    chunks = iter_chunks(documents, settings.chunk_sentences)
    bar = tqdm(unit="doc", desc="pretrain-data", disable=bar_disabled(progress), file=sys.stderr)
    with bar:
        for rows, stats in _results(chunks, job, workers):
            if stats["documents"] < 2 and not rows:
                raise DataFormatError(
                    inputs[0] if len(inputs) == 1 else ", ".join(map(str, inputs)),
                    f"found {stats['documents']} document(s): next-sentence pairs need at "
                    "least two (separate documents with a blank line)",
                )
            writer.add(rows)
            for key in STAT_KEYS:
                totals[key] += stats[key]
            bar.update(stats["documents"])
            bar.set_postfix(instances=totals["instances"])
    if totals["documents"] == 0:
        raise DataFormatError(", ".join(map(str, inputs)), "the corpus holds no text")
    shards = writer.close()
    remove_stale_files(output, len(shards))
    with atomic_write(output / VOCAB_INFO_NAME, "wb") as f:
        np.savez(f, continuation=info.continuation, special=info.special, random_pool=info.random_pool)
    meta = _meta(settings, job, tok, vocab_file, inputs, shards, totals)
    if meta["summary"]["unknown_share"] > WARN_RATE:
        report = UnknownReport(totals["text_tokens"], totals["unknown"], probe.cause)
        meta["summary"]["unknown_cause"] = report.cause
        warn_unknown(report, "the corpus")
    write_meta(output, meta)
    return meta


def _probe_unknown(tok, inputs: list[Path], allow_unknown: bool) -> UnknownReport:
    """The ``[UNK]`` report of the corpus's first :data:`PROBE_LINES` non-blank lines; above
    :data:`REFUSE_RATE` a :class:`BertkitError` with the cause, unless ``allow_unknown``."""
    from itertools import islice

    from bertkit.fileio import read_lines

    lines = (line for path in inputs for _, line in read_lines(path) if line.strip())
    report = unknown_report(tok, islice(lines, PROBE_LINES))
    if report.rate > REFUSE_RATE and not allow_unknown:
        raise BertkitError(f"{report.message('the first lines of the corpus')}; nothing written "
                           "(--allow-unknown goes on anyway)")
    return report


def _meta(settings, job, tok, vocab_file, inputs, shards, totals) -> dict:
    n = totals["instances"]
    summary = dict(totals)
    summary["is_next_share"] = totals["is_next"] / n if n else None
    summary["masked_share"] = (
        None if settings.dynamic_masking else totals["predictions"] / max(1, totals["candidates"])
    )
    summary["mean_length"] = totals["tokens"] / n if n else None
    summary["unknown_share"] = totals["unknown"] / max(1, totals["text_tokens"])
    config = asdict(settings)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "max_seq_length": settings.max_seq_length,
        "vocab_size": len(tok),
        "vocab_file": vocab_file.name,
        "vocab_sha256": _sha256(vocab_file),
        "vocab_fingerprint": tok.vocab.fingerprint(),
        "input_ids_dtype": job.ids_dtype,
        "pad_id": tok.pad_token_id,
        "cls_id": tok.cls_token_id,
        "sep_id": tok.sep_token_id,
        "mask_id": tok.mask_token_id,
        "masking": "dynamic" if settings.dynamic_masking else "static",
        "masked_lm_prob": settings.masked_lm_prob,
        "max_predictions_per_seq": settings.max_predictions_per_seq,
        "whole_word_mask": settings.whole_word_mask,
        "settings": config,
        "inputs": [p.name for p in inputs],
        "num_instances": n,
        "shards": shards,
        "summary": summary,
    }
