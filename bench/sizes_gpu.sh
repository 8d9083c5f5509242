#!/usr/bin/env bash
# The model-size curve's GPU rows (issue 37) in one bounded run on a lent GPU machine:
#   1. pre-training speed of base and large on the GPU (tokens/s; MFU is worked out from the
#      log by bench/mfu.py),
#   2. every size of SIZES pre-trained with bench/recipes/sizes-equal-tokens.env for each seed
#      of SEEDS, all at once on the one GPU, each then fine-tuned with the recipe's grid.
# Results (logs, results.json, table5.md; no weights) are packed into $OUT/results.tgz every
# 20 s, so a run stopped at its limit still returns what finished.
#
#   BUNDLE=.gpu OUT=runs/sizes-gpu-out LIMIT=480 bash bench/sizes_gpu.sh
#
# BUNDLE holds what the machine lacks: ptdata.tgz (data-train/ and data-eval/ of the recipe's
# PT_DATA, made here by bench/table5.sh), glue/ (SST-2 MRPC STS-B RTE CoLA) and vocab.txt.
# No bertkit install: PYTHONPATH=src and the machine's own torch.
set -u
cd "$(dirname "$0")/.."
BUNDLE=${BUNDLE:-.gpu} OUT=${OUT:?OUT: where results go} LIMIT=${LIMIT:-480}
SIZES=${SIZES:-tiny mini small medium base} SEEDS=${SEEDS:-1 2}
SPEED_SIZES=${SPEED_SIZES:-base:128 large:64} SPEED_STEPS=${SPEED_STEPS:-60}
EXTRA=${EXTRA:-}  # extra rows, "size:lr:seed ..." (e.g. base:3e-4:1)
DEVICE=${DEVICE:-cuda} PY=${PY:-python3}
ROW_FLAGS=${ROW_FLAGS:-}  # more bench/table5.sh flags for every row (smoke runs: --stage1 5 ...)
W=${WORK:-${TMPDIR:-/tmp}/sizes-gpu}; R=$W/results; mkdir -p "$R" "$W/pt/corpus"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MPLBACKEND=Agg
exec > >(tee -a "$R/log.txt") 2>&1
start=$(date +%s)
left() { echo $((LIMIT - ($(date +%s) - start))); }

printf '#!/bin/sh\nexec %s -c "import sys; from bertkit.cli.main import main; sys.exit(main())" "$@"\n' "$PY" > "$W/bk"
chmod +x "$W/bk"
export BERTKIT=$W/bk PYTHON=$PY
# logs, configs, results and plots only (the base rows held 4.2 GB each of weights and
# checkpoints, and a whole-tree archive outgrew what a device call brings back, 16 MB a file)
pack() { (cd "$W" && find results -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' \
           -o -name '*.log' -o -name '*.txt' -o -name '*.yaml' -o -name '*.png' \) -size -3M \
           -not -path '*/checkpoints/*' -not -name vocab.txt -not -name 'tokenizer*.json' \
           -not -name 'predictions_*' -not -name '*.tmp' | tar -czf "$OUT/results.tmp" -T -) \
         && mv "$OUT/results.tmp" "$OUT/results.tgz"; }
( while sleep 20; do pack; done ) & packer=$!

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
# the shared data where bench/table5.sh looks for it
mkdir -p ../shared/data/corpus ../shared/data/vocab
[ -e ../shared/data/glue ] || ln -s "$PWD/$BUNDLE/glue" ../shared/data/glue
[ -e ../shared/data/vocab/bert-base-uncased-vocab.txt ] || cp "$BUNDLE/vocab.txt" ../shared/data/vocab/bert-base-uncased-vocab.txt
tar -C "$W/pt" -xzf "$BUNDLE/ptdata.tgz" && touch "$W/pt/corpus/eval.txt"
echo "setup done, $(left) s left"
# the GPU tests of the suite (they skip without CUDA), beside the rest
timeout 200 "$PY" -m pytest -q -p no:cacheprovider -k "cuda or gpu" tests/model/test_unpadded.py \
  tests/training/test_step.py tests/test_precision.py tests/inference/test_engine.py \
  > "$R/gpu-tests.txt" 2>&1 &

# 1. speed: a fixed number of steps per size, alone on the GPU, bf16 (auto on a GPU)
for spec in $SPEED_SIZES; do
  size=${spec%%:*} batch=${spec##*:}
  t=$(($(left) - 300)); [ "$t" -gt 60 ] || t=60
  timeout "$t" $BERTKIT pretrain --data "$W/pt/data-train" --vocab ../shared/data/vocab/bert-base-uncased-vocab.txt \
    --model-size "$size" --batch-size "$batch" --steps "$SPEED_STEPS" --lr 1e-4 --dropout 0 \
    --device "$DEVICE" --log-every 10 --save-every 100000 --no-progress --out "$R/speed-$size-b$batch" \
    || echo "speed $size: exit $?"
  rm -rf "$R/speed-$size-b$batch/model" "$R/speed-$size-b$batch/checkpoints"
done
echo "speed done, $(left) s left"

# 2. the curve: every size and seed at once, pre-training then the recipe's grid
row() {  # row SIZE SEED [LR]
  local out="$R/tokens-$1-s$2${3:+-lr$3}"
  bash bench/table5.sh bert --recipe bench/recipes/sizes-equal-tokens.env --size "$1" --seed "$2" \
    ${3:+--lr "$3"} --pt-data "$W/pt" --out "$out" $ROW_FLAGS > "$out.log" 2>&1
  echo "row $1 seed $2 ${3:-}: exit $? at $(left) s left"
}
rows=()
for seed in $SEEDS; do for size in $SIZES; do row "$size" "$seed" & rows+=($!); done; done
for spec in $EXTRA; do IFS=: read -r size lr seed <<< "$spec"; row "$size" "$seed" "$lr" & rows+=($!); done
running() { local p; for p in "${rows[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
while running && [ "$(left)" -gt 15 ]; do sleep 5; done  # the rows, but never past the limit
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv || true
echo "stopping at $(left) s left"
kill "$packer" 2>/dev/null
pack
