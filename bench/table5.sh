#!/usr/bin/env bash
# The paper's Table 5 on the shared corpus, one row at a time, end to end from a fresh clone:
# held-out split, pre-training data, pre-training (stage 1, then stage 2 from the stage-1
# model), the GLUE fine-tuning grid (`bertkit downstream`), a frozen [CLS] linear probe, and a
# table with the machine and the precision in it (bench/table5_table.py).
#
#   bash bench/table5.sh ROW [options]
#   bash bench/table5.sh bert --seed 1 --precision fp32 --out runs/t5-s1    # the BERT row
#   bash bench/table5.sh none --out runs/t5-s1                              # no pre-training
#   bash bench/table5.sh all --out runs/t5                                  # every row
#
# ROW: bert (mlm+nsp), nonsp (mlm), ltr (left-to-right LM), none (random init, fine-tuned
#      only), bert-tiny (the shared BERT-Tiny checkpoint, fine-tuned only), or all.
# Options (defaults: bench/recipes/table5.env, the run in docs/budget-pretraining.md, whose BERT row gave STS-B 73.5
# once; a bf16 re-run gave 31.6, so that figure is not reproduced):
#   --recipe FILE          a recipe file (bench/recipes/*.env: VAR=value lines) replacing the
#                          defaults; the other flags replace the recipe's values
#   --out DIR              run folder (default runs/table5)
#   --seed S               pre-training seed: stage 1 uses S, stage 2 S+1 (default 0: the
#                          docs' run, whose stage 1 ran with the default seed 0, stage 2 seed 1)
#   --precision P          pre-training precision: auto (bf16 where the CPU has it natively),
#                          fp32, bf16 (default auto; the table records what was used)
#   --ft-precision P       fine-tuning precision (default auto: fp32 on a CPU)
#   --stage1 N             stage-1 length: steps, or a time budget such as 1h (default 3700;
#                          ltr 450: its softmax over the whole vocabulary makes a step ~6x dearer)
#   --stage2 N             stage-2 steps from the stage-1 model, 0 for none (default 8000; ltr 973)
#   --size S --lr LR       model preset and peak pre-training rate (default tiny, 1e-3; a
#                          recipe's LR_<size> line sets the rate of one size)
#   --tasks A,B            GLUE tasks (default sst2,mrpc,stsb,rte,cola; '' pre-trains only)
#   --lrs A,B --ft-seeds A,B --epochs N --max-train-examples N
#                          the fine-tuning grid (default 3e-4,1e-3 / 1,2 / 3 / 5000)
#   --probe A,B            frozen linear-probe tasks of bench/linear_probe.py, "" for none
#                          (default stsb)
#   --max-docs N           smoke tests: pre-train on the first N training documents of each
#                          corpus file only (default: all)
#   --dupe-factor N        pretrain-data duplication (default 5)
#   --workers N            pretrain-data processes (default 2)
#   --pt-data DIR          where the held-out split and the pre-training data live (default:
#                          the --out folder); several rows' folders can share one copy, as
#                          the size curve's do (bench/recipes/sizes-*.env)
# Environment: BERTKIT (default .venv/bin/bertkit), PYTHON (default .venv/bin/python).
#
# Resumable: run the same line again after an interruption. Every stage skips what is done
# (split, data, exported models, finished fine-tuning runs, probes); an unfinished
# pre-training continues from its newest checkpoint (--resume, bit for bit). The held-out
# split (every 50th document of kjv, python-docs and linux-docs) and the data do not depend
# on --seed: each --out folder makes its own, identical copy.
# Writes OUT/table5.md and OUT/table5.json. Several seeds in one table:
#   python bench/table5_table.py runs/t5-s0 runs/t5-s1 runs/t5-s2 --output runs/t5-seeds.md
# Cost on a 2-core CPU: a BERT row is about 95 CPU-minutes of pre-training plus the grid.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
ROW=$1; shift
case "$ROW" in bert|nonsp|ltr|none|bert-tiny|all) ;;
  *) echo "table5.sh: unknown row '$ROW' (bert, nonsp, ltr, none, bert-tiny, all)" >&2; exit 2 ;;
esac
# the defaults are a recipe file; a --recipe FILE replaces them, the other flags the recipe's
source bench/recipes/table5.env
RECIPE=
ARGS=("$@")
for ((i = 0; i < ${#ARGS[@]}; i++)); do
  if [ "${ARGS[i]}" = --recipe ]; then
    RECIPE=${ARGS[i+1]:-}
    [ -f "$RECIPE" ] || { echo "table5.sh: --recipe: no file '$RECIPE'" >&2; exit 2; }
    source "$RECIPE"
  fi
done
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "table5.sh: $1 needs a value" >&2; exit 2; }
  case "$1" in
    --recipe) ;; --out) OUT=$2 ;; --seed) SEED=$2 ;; --precision) PRECISION=$2 ;;
    --ft-precision) FT_PRECISION=$2 ;; --stage1) STAGE1=$2 ;; --stage2) STAGE2=$2 ;;
    --size) SIZE=$2 ;; --lr) LR=$2; LR_FLAG=1 ;; --tasks) TASKS=$2 ;; --lrs) LRS=$2 ;;
    --ft-seeds) FT_SEEDS=$2 ;; --epochs) EPOCHS=$2 ;; --max-train-examples) MAX_TRAIN=$2 ;;
    --probe) PROBE=$2 ;; --max-docs) MAX_DOCS=$2 ;; --dupe-factor) DUPE=$2 ;; --workers) WORKERS=$2 ;;
    --pt-data) PT_DATA=$2 ;;
    *) echo "table5.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
  shift 2
done
# a recipe's per-size peak rate (LR_small=3e-4) replaces LR for that size; --lr wins over both
size_lr="LR_${SIZE}"
if [ -z "${LR_FLAG:-}" ] && [ -n "${!size_lr:-}" ]; then LR=${!size_lr}; fi
case "$SEED" in ''|*[!0-9]*) echo "table5.sh: --seed must be a whole number >= 0" >&2; exit 2 ;; esac
DATA=../shared/data
[ -d "$DATA/corpus" ] || { echo "table5.sh: $DATA/corpus not found (the shared data)" >&2; exit 2; }
BERTKIT=${BERTKIT:-.venv/bin/bertkit}
PYTHON=${PYTHON:-.venv/bin/python}
VOCAB=$DATA/vocab/bert-base-uncased-vocab.txt
PT_DATA=${PT_DATA:-$OUT}
mkdir -p "$OUT" "$PT_DATA/corpus"
printf '%s\n' "$(date -u +%FT%TZ) bash bench/table5.sh $ROW ${RECIPE:+--recipe $RECIPE }--out $OUT --seed $SEED --precision $PRECISION --ft-precision $FT_PRECISION --stage1 ${STAGE1:-default} --stage2 ${STAGE2:-default} --size $SIZE --lr $LR --tasks $TASKS --lrs $LRS --ft-seeds $FT_SEEDS --epochs $EPOCHS --max-train-examples $MAX_TRAIN --probe '$PROBE' --max-docs ${MAX_DOCS:-all} --dupe-factor $DUPE --pt-data $PT_DATA" >> "$OUT/commands.txt"
$PYTHON bench/machine.py --append "$OUT/machine.jsonl" --note "table5.sh $ROW"
length() { case "$1" in *[a-z]*) echo "--budget $1" ;; *) echo "--steps $1" ;; esac; }

# 1. held-out documents: every 50th document of each corpus file is never trained on
if [ ! -f "$PT_DATA/corpus/eval.txt" ]; then
  for f in kjv python-docs linux-docs; do
    awk -v RS= -v ORS='\n\n' -v max="${MAX_DOCS:-0}" \
      'NR % 50 != 0 && (max == 0 || ++n <= max)' "$DATA/corpus/$f.txt" > "$PT_DATA/corpus/train-$f.txt"
    awk -v RS= -v ORS='\n\n' 'NR % 50 == 0' "$DATA/corpus/$f.txt" > "$PT_DATA/corpus/eval-$f.part"
  done
  cat "$PT_DATA"/corpus/eval-*.part > "$PT_DATA/corpus/eval.tmp" && mv "$PT_DATA/corpus/eval.tmp" "$PT_DATA/corpus/eval.txt"
  rm "$PT_DATA"/corpus/eval-*.part
fi

# 2. pre-training data: documents shuffled across the three files, masks drawn at load time
pretrain_data() {
  [ -f "$PT_DATA/data-train/meta.json" ] || $BERTKIT pretrain-data --input "$PT_DATA"/corpus/train-*.txt \
    --vocab "$VOCAB" --output "$PT_DATA/data-train" --dupe-factor "$DUPE" --dynamic-masking --workers "$WORKERS"
  [ -f "$PT_DATA/data-eval/meta.json" ] || $BERTKIT pretrain-data --input "$PT_DATA/corpus/eval.txt" \
    --vocab "$VOCAB" --output "$PT_DATA/data-eval" --dupe-factor 1 --dynamic-masking --seed 7
}

GRID=(--tasks "$TASKS" --data "$DATA/glue" --lrs "$LRS" --seeds "$FT_SEEDS" --epochs "$EPOCHS"
      --max-train-examples "$MAX_TRAIN" --precision "$FT_PRECISION")
probe() {  # probe MODEL_DIR OUTPUT.jsonl
  [ -z "$PROBE" ] || [ -f "$2" ] || $PYTHON bench/linear_probe.py "$1" --tasks "$PROBE" \
    --train-examples "$MAX_TRAIN" --threads "${OMP_NUM_THREADS:-1}" --output "$2"
}

# 3. one pre-trained row: stage 1, stage 2 from its model, the grid on the last stage, probes
pretrained_row() {  # pretrained_row OBJECTIVE
  local objective=$1 name=${1/+/_} s1 s2 run1 run2 final
  s1=${STAGE1:-3700}; s2=${STAGE2:-8000}
  if [ "$objective" = ltr ]; then s1=${STAGE1:-450}; s2=${STAGE2:-973}; fi
  pretrain_data
  local common=(--data "$PT_DATA/data-train" --eval-data "$PT_DATA/data-eval" --vocab "$VOCAB"
                --model-size "$SIZE" --objective "$objective" --batch-size 32 --lr "$LR"
                --warmup-fraction 0.06 --dropout 0 --precision "$PRECISION" --log-every 50
                --eval-batches 38 --save-every 250 --resume)
  run1="$OUT/pt-$name"; run2="$OUT/pt2-$name"; final=$run1
  # shellcheck disable=SC2046  # length() prints a flag and its value
  [ -f "$run1/model/config.json" ] || $BERTKIT pretrain "${common[@]}" --out "$run1" \
    $(length "$s1") --seed "$SEED" --eval-every 250
  if [ "$s2" != 0 ]; then
    [ -f "$run2/model/config.json" ] || $BERTKIT pretrain "${common[@]}" --out "$run2" \
      --init-from "$run1/model" --steps "$s2" --seed $((SEED + 1)) --eval-every 500
    final=$run2
  fi
  [ -n "$TASKS" ] || return 0  # pre-training only
  $BERTKIT downstream "$final/model" --out "$final/glue" "${GRID[@]}"
  probe "$final/model" "$final/probe.jsonl"
  [ "$final" = "$run1" ] || probe "$run1/model" "$run1/probe.jsonl"
}

# 4. no pre-training: the same architecture from random weights (a config and a vocabulary)
none_row() {
  local arch="$OUT/arch-$SIZE"
  if [ ! -f "$arch/config.json" ]; then
    mkdir -p "$arch" && cp "$VOCAB" "$arch/vocab.txt"
    $PYTHON -c 'import sys; from bertkit.config import BertConfig
n = sum(1 for _ in open(sys.argv[2], encoding="utf-8"))
BertConfig.preset(sys.argv[1], vocab_size=n).to_json(sys.argv[3])' "$SIZE" "$VOCAB" "$arch/config.json"
  fi
  $BERTKIT downstream "$arch" --random-init --out "$OUT/random-init/glue" "${GRID[@]}"
}

case "$ROW" in
  bert) pretrained_row mlm+nsp ;;
  nonsp) pretrained_row mlm ;;
  ltr) pretrained_row ltr ;;
  none) none_row ;;
  bert-tiny) $BERTKIT downstream "$DATA/models/bert-tiny-splade" --out "$OUT/bert-tiny/glue" "${GRID[@]}" ;;
  all) for o in mlm+nsp mlm ltr; do pretrained_row "$o"; done; none_row
       $BERTKIT downstream "$DATA/models/bert-tiny-splade" --out "$OUT/bert-tiny/glue" "${GRID[@]}" ;;
esac

# 5. the table: every row this folder holds, with the machine and the precision; the
#    pre-training curves and the paper's layout with its chart (bertkit compare-downstream)
$PYTHON bench/table5_table.py "$OUT" --output "$OUT/table5.md"
runs=() dirs=() names=()
for pair in pt-mlm_nsp:BERT pt-mlm:"No NSP" pt-ltr:"LTR & No NSP"; do
  key=${pair%%:*}
  [ -f "$OUT/$key/log.jsonl" ] && runs+=("$OUT/$key")
  [ -f "$OUT/pt2-${key#pt-}/log.jsonl" ] && runs+=("$OUT/pt2-${key#pt-}")
  for d in "$OUT/pt2-${key#pt-}" "$OUT/$key"; do  # the last stage's downstream
    if [ -f "$d/glue/results.json" ]; then dirs+=("$d/glue"); names+=("${pair#*:}"); break; fi
  done
done
[ -f "$OUT/random-init/glue/results.json" ] && { dirs+=("$OUT/random-init/glue"); names+=(none); }
[ -f "$OUT/bert-tiny/glue/results.json" ] && { dirs+=("$OUT/bert-tiny/glue"); names+=(BERT-Tiny); }
if [ ${#runs[@]} -gt 0 ]; then
  $BERTKIT plot "${runs[@]}" --out "$OUT/pretraining.png" \
    --metrics loss,mlm_acc,eval_mlm_acc,nsp_acc,eval_nsp_acc || echo "table5.sh: no pre-training plot"
fi
if [ ${#dirs[@]} -gt 0 ]; then
  baseline=(); [ -f "$OUT/random-init/glue/results.json" ] && baseline=(--baseline none)
  $BERTKIT compare-downstream "${dirs[@]}" --names "$(IFS=,; echo "${names[*]}")" \
    "${baseline[@]}" --chart "$OUT/table5.png"
fi
