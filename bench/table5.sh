#!/usr/bin/env bash
# The paper's Table 5 on the shared corpus, at one equal time budget per model:
# mlm+nsp (BERT), mlm (No NSP), ltr (LTR & No NSP), and no pre-training, each fine-tuned
# with `bertkit downstream`; the real BERT-Tiny checkpoint as a reference row.
#
#   bash bench/table5.sh [OUT] [BUDGET] [SIZE] [LR]   # defaults: runs/table5 1h tiny 1e-3
#   STAGE2=8000 bash bench/table5.sh ...              # then 8,000 more steps (section 5)
#   LTR_BUDGET=450 LTR_STAGE2=973 STAGE2=8000 bash bench/table5.sh OUT 3700   # the docs' run
#
# BUDGET is either a time (`1h`, `30m`: `pretrain --budget`, steps planned from the speed
# measured at the start) or a step count (`3700`: the same compute for every objective on a
# machine whose speed changes). The run in docs/budget-pretraining.md used `tiny` with 3,700
# steps for mlm+nsp and mlm and 450 for ltr (its full-vocabulary softmax over every position
# makes a step ~6x dearer; 450 steps was its share of the same wall-clock time): LTR_BUDGET
# gives ltr its own BUDGET (default: BUDGET), LTR_STAGE2 its own stage-2 steps (default STAGE2).
#
# Every stage resumes: re-run the same line after an interruption (pretrain --resume,
# downstream skips finished runs). Needs ../shared/data. Runs one stage at a time: on a
# 2-core machine, 4 x BUDGET for pre-training plus the fine-tuning grid (hours).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/table5}
BUDGET=${2:-1h}
SIZE=${3:-tiny}
LR=${4:-1e-3}
length() { case "$1" in *[a-z]*) echo "--budget $1" ;; *) echo "--steps $1" ;; esac; }
DATA=../shared/data
BERTKIT=${BERTKIT:-.venv/bin/bertkit}
VOCAB=$DATA/vocab/bert-base-uncased-vocab.txt
mkdir -p "$OUT/corpus"

# 1. held-out documents: every 50th document of each corpus file is never trained on
if [ ! -f "$OUT/corpus/eval.txt" ]; then
  for f in kjv python-docs linux-docs; do
    awk -v RS= -v ORS='\n\n' 'NR % 50 != 0' "$DATA/corpus/$f.txt" > "$OUT/corpus/train-$f.txt"
    awk -v RS= -v ORS='\n\n' 'NR % 50 == 0' "$DATA/corpus/$f.txt" > "$OUT/corpus/eval-$f.part"
  done
  cat "$OUT"/corpus/eval-*.part > "$OUT/corpus/eval.txt"
  rm "$OUT"/corpus/eval-*.part
fi

# 2. pre-training data: documents shuffled across the three files (the default), masks drawn
#    at load time
[ -f "$OUT/data-train/meta.json" ] || $BERTKIT pretrain-data --input "$OUT"/corpus/train-*.txt \
  --vocab "$VOCAB" --output "$OUT/data-train" --dupe-factor 5 --dynamic-masking --workers 2
[ -f "$OUT/data-eval/meta.json" ] || $BERTKIT pretrain-data --input "$OUT/corpus/eval.txt" \
  --vocab "$VOCAB" --output "$OUT/data-eval" --dupe-factor 1 --dynamic-masking --seed 7

# 3. pre-training, one budget each (the recipe: bf16 where native, dropout off, 6% warm-up)
for objective in mlm+nsp mlm ltr; do
  run="$OUT/pt-${objective/+/_}"
  [ -f "$run/model/config.json" ] && continue
  budget=$BUDGET; [ "$objective" = ltr ] && budget=${LTR_BUDGET:-$BUDGET}
  # shellcheck disable=SC2046  # length() prints a flag and its value
  $BERTKIT pretrain --data "$OUT/data-train" --eval-data "$OUT/data-eval" --vocab "$VOCAB" \
    --out "$run" --model-size "$SIZE" --objective "$objective" $(length "$budget") \
    --batch-size 32 --lr "$LR" --warmup-fraction 0.06 --dropout 0 --log-every 50 \
    --eval-every 250 --eval-batches 38 --save-every 250 --resume
done
$BERTKIT plot "$OUT"/pt-* --out "$OUT/pretraining.png" \
  --metrics loss,mlm_acc,eval_mlm_acc,nsp_acc,eval_nsp_acc

# 4. downstream: the same small grid for every row
GRID=(--tasks sst2,mrpc,stsb,rte,cola --data "$DATA/glue" --lrs 3e-4,1e-3 --seeds 1,2
      --epochs 3 --max-train-examples 5000)
for objective in mlm+nsp mlm ltr; do
  run="$OUT/pt-${objective/+/_}"
  $BERTKIT downstream "$run/model" --out "$run/glue" "${GRID[@]}"
done
$BERTKIT downstream "$OUT/pt-mlm_nsp/model" --random-init --out "$OUT/random-init/glue" "${GRID[@]}"
$BERTKIT downstream "$DATA/models/bert-tiny-splade" --out "$OUT/bert-tiny/glue" "${GRID[@]}"
$BERTKIT compare-downstream "$OUT"/pt-mlm_nsp/glue "$OUT"/pt-mlm/glue "$OUT"/pt-ltr/glue \
  "$OUT"/random-init/glue "$OUT"/bert-tiny/glue --names BERT,"No NSP","LTR & No NSP",none,BERT-Tiny \
  --baseline none --chart "$OUT/table5.png"

# 5. optional second stage (docs/budget-pretraining.md, "Stage 2"): STAGE2=8000 continues the
#    three models for that many more steps (ltr: LTR_STAGE2) from their exported stage-1 models
#    (a new warm-up and decay, the same recipe, seed 1), then fine-tunes them with the same grid.
if [ -n "${STAGE2:-}" ]; then
  for objective in mlm+nsp mlm ltr; do
    run="$OUT/pt2-${objective/+/_}"
    steps=$STAGE2; [ "$objective" = ltr ] && steps=${LTR_STAGE2:-$STAGE2}
    [ -f "$run/model/config.json" ] || $BERTKIT pretrain --data "$OUT/data-train" \
      --eval-data "$OUT/data-eval" --vocab "$VOCAB" --init-from "$OUT/pt-${objective/+/_}/model" \
      --out "$run" --model-size "$SIZE" --objective "$objective" --steps "$steps" --seed 1 \
      --batch-size 32 --lr "$LR" --warmup-fraction 0.06 --dropout 0 --log-every 50 \
      --eval-every 500 --eval-batches 38 --save-every 250 --resume
    $BERTKIT downstream "$run/model" --out "$run/glue" "${GRID[@]}"
  done
  # --names is comma-separated: no commas inside a name
  $BERTKIT compare-downstream "$OUT"/pt2-mlm_nsp/glue "$OUT"/pt2-mlm/glue "$OUT"/pt2-ltr/glue \
    "$OUT"/random-init/glue "$OUT"/bert-tiny/glue \
    --names "BERT (stage 2)","No NSP (stage 2)","LTR & No NSP (stage 2)",none,BERT-Tiny \
    --baseline none --chart "$OUT/table5-stage2.png"
fi
