#!/usr/bin/env bash
# Domain-adaptive pre-training on a CPU, measured (issue 26; docs/pretraining.md,
# "Domain-adaptive pre-training"): continue pre-training a released checkpoint on the Python
# documentation for a time budget, then fine-tune on a task built from documents held out of
# that text (bench/domain_task.py), beside the checkpoint as it is and the same size
# pre-trained from scratch for the same budget.
#
#   bash bench/dapt.sh [OUT] [BUDGET]         # defaults: runs/dapt 30m
#
# Settings (environment):
#   MODEL=../shared/data/models/bert-tiny-splade   the checkpoint to adapt
#   STEPS=N            pre-train N steps instead of BUDGET (a smoke test, or equal steps)
#   SCRATCH=0          leave out the from-scratch row
#   PT_SEED=1          pre-training seed (another seed in another OUT gives the spread over
#                      pre-training runs; OUT may link data/, pt-data/, pt-eval/ of the first)
#   LRS=3e-4,1e-3 SEEDS=1,2 EPOCHS=3               the fine-tuning grid (every row the same)
#   MAX_TRAIN_EXAMPLES=N                           fine-tune on a sample of the training set
#   PRECISION=fp32     pre-training and fine-tuning precision (auto picks bf16 on native-bf16
#                      CPUs; say which one a figure used)
#   ROWS="checkpoint domain scratch"               the rows the finetune and glue stages run
#   GLUE=sst2 GLUE_TRAIN=5000                      the GLUE check (what the domain step costs
#                      elsewhere): bertkit downstream with the same lrs and seeds, per row
#   STAGES="task data pretrain finetune glue table"   the stages to run, in this order
#   BERTKIT=.venv/bin/bertkit PYTHON=.venv/bin/python
#   RECIPE=bench/recipes/NAME.env                  a file of these settings (VAR=value lines)
#
# Every stage resumes: re-run the same line after an interruption (the task and data are
# skipped once written, pretrain --resume keeps its budget plan and time spent, a finished
# fine-tuning run - one with results.json - is skipped, an unfinished one resumes after its
# last finished epoch or starts again). The fine-tuning stage skips a row whose model is not
# exported yet, so it can run beside the pre-training. Writes OUT/results.md and
# OUT/results.json (bench/dapt_table.py): every run, each row's chosen learning rate, dev and
# test accuracy and macro-F1 (mean +- sd over seeds), the steps each pre-training did, the
# machine and the precision. One torch thread per process (OMP_NUM_THREADS, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${RECIPE:-}" ]; then  # a recipe file (bench/recipes/*.env) sets any of the settings above
  [ -f "$RECIPE" ] || { echo "dapt.sh: RECIPE: no file '$RECIPE'" >&2; exit 2; }
  source "$RECIPE"
fi
OUT=${1:-runs/dapt}
BUDGET=${2:-30m}
DATA=../shared/data
MODEL=${MODEL:-$DATA/models/bert-tiny-splade}
BERTKIT=${BERTKIT:-.venv/bin/bertkit}
PYTHON=${PYTHON:-.venv/bin/python}
VOCAB=$DATA/vocab/bert-base-uncased-vocab.txt
PRECISION=${PRECISION:-fp32}
LRS=${LRS:-3e-4,1e-3}
SEEDS=${SEEDS:-1,2}
EPOCHS=${EPOCHS:-3}
STAGES=${STAGES:-task data pretrain finetune glue table}
ROWS=${ROWS:-checkpoint domain scratch}
[ "${SCRATCH:-1}" != 0 ] || ROWS=${ROWS//scratch/}
for s in $STAGES; do  # a misspelt stage or row would run nothing and exit 0
  case $s in task|data|pretrain|finetune|glue|table) ;;
    *) echo "dapt.sh: STAGES: unknown stage '$s' (task data pretrain finetune glue table)" >&2; exit 2 ;; esac
done
for r in $ROWS; do
  case $r in checkpoint|domain|scratch) ;;
    *) echo "dapt.sh: ROWS: unknown row '$r' (checkpoint domain scratch)" >&2; exit 2 ;; esac
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
has() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if [ -n "${STEPS:-}" ]; then LENGTH=(--steps "$STEPS"); else LENGTH=(--budget "$BUDGET"); fi
mkdir -p "$OUT"
$PYTHON bench/machine.py --append "$OUT/machine.jsonl" --note "dapt.sh $STAGES"

# 1. the task and the domain text without its documents
if has task && [ ! -f "$OUT/data/task/stats.json" ]; then
  $PYTHON bench/domain_task.py --corpus "$DATA/corpus/python-docs.txt" --out "$OUT/data"
fi

# 2. pre-training data: the domain text, and the held-out documents for held-out MLM
if has data; then
  [ -f "$OUT/pt-data/meta.json" ] || $BERTKIT pretrain-data --input "$OUT/data/pretrain.txt" \
    --vocab "$VOCAB" --output "$OUT/pt-data" --dupe-factor 5 --dynamic-masking --workers 1
  [ -f "$OUT/pt-eval/meta.json" ] || $BERTKIT pretrain-data --input "$OUT/data/heldout.txt" \
    --vocab "$VOCAB" --output "$OUT/pt-eval" --dupe-factor 1 --dynamic-masking --seed 7
fi

# 3. pre-training, masked LM only (the checkpoint has no NSP head): the checkpoint continued
#    at lr 5e-4 (DAPT's peak rate), and the same size from scratch at 1e-3 (Table 5's)
PT=(--data "$OUT/pt-data" --eval-data "$OUT/pt-eval" --vocab "$VOCAB" --objective mlm
    "${LENGTH[@]}" --batch-size 32 --warmup-fraction 0.06 --dropout 0 --precision "$PRECISION"
    --seed "${PT_SEED:-1}" --log-every 50 --eval-every 500 --eval-batches 20 --save-every 250 --resume)
if has pretrain; then
  [ -f "$OUT/pt-domain/model/config.json" ] || $BERTKIT pretrain "${PT[@]}" \
    --init-from "$MODEL" --lr 5e-4 --out "$OUT/pt-domain"
  if [ "${SCRATCH:-1}" != 0 ] && [ ! -f "$OUT/pt-scratch/model/config.json" ]; then
    $BERTKIT pretrain "${PT[@]}" --model-size tiny --lr 1e-3 --out "$OUT/pt-scratch"
  fi
fi

# 4. fine-tuning: the same grid for every row; each run also scored on the test split
finetune() {  # finetune NAME MODEL_DIR
  local name=$1 model=$2 lr seed run
  if [ ! -f "$model/config.json" ]; then echo "skip $name: $model not exported yet"; return; fi
  for lr in ${LRS//,/ }; do
    for seed in ${SEEDS//,/ }; do
      run="$OUT/ft/$name/lr-${lr}_seed-$seed"
      if [ ! -f "$run/results.json" ]; then
        local args=(text-classification --model "$model" --data "$OUT/data/task" --out "$run"
                    --lr "$lr" --seed "$seed" --epochs "$EPOCHS" --batch-size 32 --threads 1
                    --precision "$PRECISION")
        [ -n "${MAX_TRAIN_EXAMPLES:-}" ] && args+=(--max-train-examples "$MAX_TRAIN_EXAMPLES")
        if [ -d "$run" ]; then  # killed: resume after its last epoch, else start again
          $BERTKIT finetune "${args[@]}" --resume || $BERTKIT finetune "${args[@]}" --overwrite
        else
          $BERTKIT finetune "${args[@]}"
        fi
      fi
      [ -f "$run/test.json" ] || $BERTKIT evaluate text-classification --model "$run" \
        --data "$OUT/data/task" --dev-file test.jsonl --threads 1 --output "$run/test.json"
    done
  done
}
row_model() {  # row_model ROW: the model directory of a row
  case "$1" in checkpoint) echo "$MODEL" ;; domain) echo "$OUT/pt-domain/model" ;;
    scratch) echo "$OUT/pt-scratch/model" ;; *) echo "dapt.sh: unknown row $1" >&2; exit 2 ;; esac
}
if has finetune; then
  for row in $ROWS; do finetune "$row" "$(row_model "$row")"; done
fi

# 5. what the domain step costs elsewhere: a GLUE task, the same lrs and seeds
if has glue && [ -n "${GLUE:-sst2}" ]; then
  for row in $ROWS; do
    model=$(row_model "$row")
    if [ ! -f "$model/config.json" ]; then echo "skip glue $row: $model not exported yet"; continue; fi
    $BERTKIT downstream "$model" --out "$OUT/glue/$row" --tasks "${GLUE:-sst2}" \
      --data "$DATA/glue" --lrs "$LRS" --seeds "$SEEDS" --epochs "$EPOCHS" \
      --max-train-examples "${GLUE_TRAIN:-5000}" --precision "$PRECISION"
  done
fi

# 6. the table, with the machine and the precision
if has table; then
  $PYTHON bench/dapt_table.py "$OUT" --precision "$PRECISION" --lrs "$LRS" --seeds "$SEEDS"
fi
