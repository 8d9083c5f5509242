"""Long-text NER data: CoNLL-2003 sentences joined, within each document, into texts longer
than a WordPiece budget (``--min-pieces``, default 160 > max_seq_length 128).

Reads a CoNLL file (``-DOCSTART-`` separates documents), converts tags to IOB2, and writes
``OUT/dev.txt`` (``word tag`` lines, one joined text per block): consecutive sentences of a
document are appended to the current text until it holds at least ``--min-pieces``
WordPieces (``[CLS]``/``[SEP]`` not counted); a document's last, shorter group is kept too,
so every word and entity of the input is in the output exactly once. Prints how many texts
and entities lie (partly) beyond the first ``--limit - 2`` pieces (what truncation loses).

    python bench/conll_join.py ../shared/data/conll2003/dev.txt out/conll_long \
        --tokenizer ../shared/data/models/bert-tiny-splade
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bertkit.metrics import split_tag
from bertkit.tasks.formats.conll import iob1_to_iob2
from bertkit.tokenizer import BertTokenizer


def documents(path: Path) -> list[list[tuple[list[str], list[str]]]]:
    """Documents, each a list of (words, tags) sentences."""
    docs, sentence = [[]], ([], [])
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if sentence[0]:
                docs[-1].append((sentence[0], iob1_to_iob2(sentence[1])))
                sentence = ([], [])
            if parts and docs[-1]:
                docs.append([])
            continue
        sentence[0].append(parts[0])
        sentence[1].append(parts[-1])
    if sentence[0]:
        docs[-1].append((sentence[0], iob1_to_iob2(sentence[1])))
    return [d for d in docs if d]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("conll", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--tokenizer", required=True, help="model directory whose tokenizer counts pieces")
    parser.add_argument("--min-pieces", type=int, default=160)
    parser.add_argument("--limit", type=int, default=128, help="max_seq_length the stats refer to")
    args = parser.parse_args(argv)
    tok = BertTokenizer.from_pretrained(args.tokenizer)
    texts = []
    for doc in documents(args.conll):
        words, tags, pieces = [], [], 0
        for w, t in doc:
            words += w
            tags += t
            pieces += sum(len(tok.text_to_ids(x)) for x in w)
            if pieces >= args.min_pieces:
                texts.append((words, tags))
                words, tags, pieces = [], [], 0
        if words:
            texts.append((words, tags))
    args.out.mkdir(parents=True, exist_ok=True)
    budget = args.limit - 2
    long_texts, entities, beyond = 0, 0, 0
    with open(args.out / "dev.txt", "w", encoding="utf-8") as f:
        for words, tags in texts:
            ends = []
            total = 0
            for w in words:
                total += len(tok.text_to_ids(w))
                ends.append(total)
            long_texts += total > budget
            for w, t in zip(words, tags):
                f.write(f"{w} {t}\n")
            f.write("\n")
            for i, t in enumerate(tags):
                if split_tag(t)[0] == "B":
                    entities += 1
                    j = i
                    while j + 1 < len(tags) and tags[j + 1].startswith("I-"):
                        j += 1
                    beyond += ends[j] > budget
    stats = {"texts": len(texts), "longer_than_limit": long_texts, "entities": entities,
             "entities_beyond_limit": beyond, "limit": args.limit, "min_pieces": args.min_pieces}
    (args.out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
