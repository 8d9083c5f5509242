"""One-off check: a bertkit model with pruned heads loads in transformers 4.x by itself.

transformers 5 dropped head pruning (``pruned_heads`` is no longer applied on load), so the
test suite checks parity by pruning the Hugging Face model by hand; this script checks the
real loader of 4.x, installed into a scratch directory (not a project dependency)::

    pip install --no-deps --target .hf4 transformers==4.46.3 tokenizers==0.20.3 \
        huggingface_hub==0.26.5 requests urllib3 idna certifi charset_normalizer
    python bench/pruned_heads_hf4.py .hf4                      # a small random model, pruned here
    python bench/pruned_heads_hf4.py .hf4 PRUNED_DIR [UNPRUNED_DIR] # a model saved by bertkit prune

Prints the transformers version, parameter counts and the largest logit difference. With a
model directory (a sequence classifier saved by ``bertkit prune``), both libraries load it
from disk and run the first 64 SST-2 dev sentences (``../shared/data/glue``) in one padded
batch; ``UNPRUNED_DIR`` adds its parameter count for comparison.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def check_directory(transformers, directory: str, unpruned: str | None) -> None:
    from bertkit.checkpoint import load_pretrained, load_tokenizer
    from bertkit.model.pruning import count_heads

    ours = load_pretrained(directory).eval()
    hf = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    lines = (DATA / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:65]
    encodings = load_tokenizer(directory).encode_batch([line.split("\t")[0] for line in lines],
                                                       max_length=128, padding="longest")
    ids = torch.tensor([e.input_ids for e in encodings])
    mask = torch.tensor([e.attention_mask for e in encodings])
    with torch.no_grad():
        mine = ours(ids, attention_mask=mask).logits
        theirs = hf(input_ids=ids, attention_mask=mask).logits
    counts = f"bertkit {sum(p.numel() for p in ours.parameters())}, transformers {hf.num_parameters()}"
    if unpruned:
        counts += f", unpruned {sum(p.numel() for p in load_pretrained(unpruned).parameters())}"
    print(f"{directory}: heads {count_heads(ours)}; parameters {counts}; "
          f"max abs logit difference over {len(lines)} sentences {(mine - theirs).abs().max().item():.2e} "
          f"(logits range {mine.min().item():.3f} to {mine.max().item():.3f})")


def main() -> None:
    sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".hf4")
    import transformers

    if len(sys.argv) > 2:
        print("transformers", transformers.__version__)
        check_directory(transformers, sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
        return

    from bertkit.checkpoint import save_pretrained
    from bertkit.config import BertConfig
    from bertkit.model import BertForSequenceClassification
    from bertkit.model.pruning import count_heads, prune_heads

    print("transformers", transformers.__version__)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=32)
    model = BertForSequenceClassification(config, num_labels=3).eval()
    before = sum(p.numel() for p in model.parameters())
    prune_heads(model, {0: [1, 3], 1: [0], 2: [0, 2, 3]})
    directory = Path(tempfile.mkdtemp()) / "pruned"
    save_pretrained(model, directory)
    hf = transformers.BertForSequenceClassification.from_pretrained(directory).eval()
    ids = torch.randint(5, 60, (4, 13))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    with torch.no_grad():
        ours = model(ids, attention_mask=mask).logits
        theirs = hf(input_ids=ids, attention_mask=mask).logits
    print(f"heads {count_heads(model)} of 12; parameters bertkit "
          f"{sum(p.numel() for p in model.parameters())}, transformers {hf.num_parameters()}, "
          f"unpruned {before}; max abs logit difference {(ours - theirs).abs().max().item()}")


if __name__ == "__main__":
    main()
