"""Shared by the pre-training loop tests: a tiny corpus, its data directory, run settings."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from bertkit.pretraining.train_config import PretrainConfig

WORDS = ("the man went to store a want , . he she is was good bad day night cafe "
         "hello world quick run").split()
VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "man", "went", "to", "store", "a", "un", "##want", "##ed", "want", ",", ".", "!",
    "runn", "##ing", "run", "he", "she", "is", "was", "good", "bad", "day", "night", "cafe",
    "hello", "world", "quick",
]
MODEL_CONFIG = {  # smaller than the tiny preset: the tests are about the loop
    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "max_position_embeddings": 64,
}


def make_data(root: Path, documents: int = 12, seed: int = 0) -> dict[str, Path]:
    """A static-masked data directory of a few dozen 32-token instances, plus vocab and
    model config files."""
    from bertkit.config import BertConfig
    from bertkit.pretraining.data import CreationSettings, create_pretraining_data

    rng = random.Random(seed)
    docs = ["\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10)))
                      for _ in range(rng.randint(3, 6))) for _ in range(documents)]
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    settings = CreationSettings(max_seq_length=32, dupe_factor=1, max_predictions_per_seq=5, seed=seed)
    create_pretraining_data([root / "corpus.txt"], root / "vocab.txt", root / "data", settings,
                            progress=False)
    BertConfig(vocab_size=len(VOCAB), **MODEL_CONFIG).to_json(root / "model.json")
    return {"data": root / "data", "vocab": root / "vocab.txt", "model_config": root / "model.json"}


def settings(files: dict[str, Path], out: Path, **overrides) -> PretrainConfig:
    values = dict(data=str(files["data"]), vocab=str(files["vocab"]),
                  model_config=str(files["model_config"]), out=str(out), steps=8, batch_size=4,
                  log_every=2, save_every=3, lr=1e-3, progress=False, seed=3)
    values.update(overrides)
    return PretrainConfig(**values)


def cli_flags(config: PretrainConfig) -> list[str]:
    """``bertkit pretrain`` flags that give ``config`` (for launches through the command line)."""
    flags = []
    for name, value in config.to_dict().items():
        if value is None or isinstance(value, bool):
            if value is not None:
                flags.append(f"--{'' if value else 'no-'}{name.replace('_', '-')}")
            continue
        flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(Path(run_dir) / "model" / "model.safetensors"))


def losses(run_dir: Path) -> list[dict]:
    """The metric records of a run (events and timings left out)."""
    from bertkit.runlog import read_log

    skip = {"time", "tokens_per_s"}
    return [{k: v for k, v in r.items() if k not in skip}
            for r in read_log(Path(run_dir) / "log.jsonl") if "event" not in r]
