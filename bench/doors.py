"""A SQuAD 2.0 dev file scored through the server's path and through ``bertkit evaluate``.

    python bench/doors.py MODEL_DIR [--data ../shared/data/squad] [--limit N]

MODEL_DIR is a model fine-tuned by ``bertkit finetune squad2``. The script asks ``POST
/predict`` of ``bertkit serve``'s app (in process, TEI's grammar, requests of 32 questions)
for every question of ``dev-v2.0.json``, scores the answers with the official v2.0 rules
(:func:`bertkit.metrics.squad_evaluate`), runs ``bertkit evaluate squad2`` on the same file,
and prints both EM/F1 pairs, which must be identical: the server decodes SQuAD with the task
family's post-processing (doc stride, max context, the saved no-answer threshold).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "squad"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a directory fine-tuned by `bertkit finetune squad2`")
    parser.add_argument("--data", default=str(DATA), help="folder with dev-v2.0.json")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    args = parser.parse_args(argv)

    from fastapi.testclient import TestClient

    from bertkit.cli.main import main as bertkit
    from bertkit.metrics import squad_evaluate
    from bertkit.serve.app import create_app
    from bertkit.serve.config import ServeConfig

    dataset = json.loads((Path(args.data) / "dev-v2.0.json").read_text(encoding="utf-8"))
    questions = [(q["id"], q["question"], p["context"]) for a in dataset["data"]
                 for p in a["paragraphs"] for q in p["qas"]][:args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.data)
        if args.limit is not None:  # the same questions for evaluate
            keep = {q[0] for q in questions}
            for article in dataset["data"]:
                for p in article["paragraphs"]:
                    p["qas"] = [q for q in p["qas"] if q["id"] in keep]
            folder = Path(tmp)
            (folder / "dev-v2.0.json").write_text(json.dumps(dataset))
        start = time.perf_counter()
        answers = {}
        with TestClient(create_app(ServeConfig(model=args.model))) as client:
            for i in range(0, len(questions), 32):
                chunk = questions[i:i + 32]
                response = client.post("/predict", json={"inputs": [{"question": q, "context": c}
                                                                     for _, q, c in chunk]})
                response.raise_for_status()
                answers.update({qid: a["answer"] for (qid, _, _), a in zip(chunk, response.json())})
        served = time.perf_counter() - start
        server = squad_evaluate(dataset, answers, version="v2.0")
        start = time.perf_counter()
        out = Path(tmp) / "eval.json"
        bertkit(["evaluate", "squad2", "--model", args.model, "--data", str(folder), "--precision",
                 "fp32", "--output", str(out), "--no-progress"])
        evaluated = json.loads(out.read_text())["metrics"]["dev"]
    print(f"questions: {len(questions)}")
    print(f"server path : EM {server['exact']:.3f}  F1 {server['f1']:.3f}  ({served:.0f} s)")
    print(f"evaluate    : EM {evaluated['exact']:.3f}  F1 {evaluated['f1']:.3f}  "
          f"({time.perf_counter() - start:.0f} s)")
    same = (server["exact"], server["f1"]) == (evaluated["exact"], evaluated["f1"])
    print("identical" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
