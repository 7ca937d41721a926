#!/usr/bin/env bash
# The GPU paths, on a machine with one CUDA device, most important first: GRPO against TRL's
# GRPOTrainer at the Qwen2.5-0.5B shape (time split and peak memory, gradient checkpointing off
# and on), the reward server with a reward model on the GPU (batching off/on, large batches
# against in process), reward-model and process-reward-model training against their peers in
# bf16, reward-model scoring by batch size (one model against a K-head ensemble), GRPO against
# TRL at the Qwen2.5-1.5B shape for memory (does it fit, with and without checkpointing), and
# the tests marked `gpu`. Every part has its own time limit and log:
#
#     bash benchmarks/gpu_checks.sh [--tiny] [--parts P1,P2,...] [--list] LOGDIR [SECONDS_SCALE]
#
# The parts' limits, set from their times on one H200 (docs/trainer.md), add up to about
# 17 minutes, more than one 10-minute command: --parts runs the named parts only, in the
# script's order (names: grpo_0.5b server rm_train prm_train batch_sizes grpo_1.5b tests), and
# --list prints what would run with each limit, running nothing. SECONDS_SCALE (default 1)
# stretches or shrinks every limit. The logs are LOGDIR/<part>.log; a part that fails or runs
# out of time leaves the others standing. --tiny runs the parts on the CPU with tiny shapes,
# side by side, each limited to 10 minutes (its figures mean nothing; it checks that the script
# still runs: tests/test_gpu_checks_script.py).
set -uo pipefail
cd "$(dirname "$0")/.."
USAGE="usage: gpu_checks.sh [--tiny] [--parts P1,P2,...] [--list] LOGDIR [SECONDS_SCALE]"
ALL_PARTS=" grpo_0.5b server rm_train prm_train batch_sizes grpo_1.5b tests "
TINY=0 LIST=0 PARTS=$ALL_PARTS
while [ $# -gt 0 ]; do
  case $1 in
    --tiny) TINY=1; shift ;;
    --list) LIST=1; shift ;;
    --parts)
      [ $# -ge 2 ] || { echo "--parts needs a comma-separated list of parts" >&2; exit 2; }
      PARTS=" ${2//,/ } "
      for name in $PARTS; do
        case $ALL_PARTS in *" $name "*) ;; *)
          echo "unknown part '$name'; the parts are:$ALL_PARTS" >&2; exit 2 ;;
        esac
      done
      shift 2 ;;
    -*) echo "unknown option $1; $USAGE" >&2; exit 2 ;;
    *) break ;;
  esac
done
LOGS=${1:?$USAGE}
SCALE=${2:-1}
PY=${PYTHON:-python3}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false TRANSFORMERS_VERBOSITY=error \
       HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 HF_DATASETS_DISABLE_PROGRESS_BARS=1

part() {  # part NAME SECONDS COMMAND...: its report printed in one piece when it ends
  local name=$1 limit start=$SECONDS rc
  case $PARTS in *" $name "*) ;; *) return 0 ;; esac
  limit=$(awk "BEGIN {print int(($TINY ? 600 : $2) * $SCALE)}")
  shift 2
  if [ "$LIST" = 1 ]; then echo "== $name (limit ${limit} s): $*"; return 0; fi
  timeout -k 10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  { echo "== $name (limit ${limit} s): $*"
    echo "   rc=$rc in $((SECONDS - start)) s"
    tail -n 12 "$LOGS/$name.log" | cut -c1-240 | sed 's/^/   | /'; }
}

if [ "$TINY" = 1 ]; then
  # Side by side, one torch thread each: only whether each part runs counts.
  export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  DEV=cpu
  # checkpointing off in the one GRPO part, on in the other: both paths, half the runs
  GRPO_05B=(--shape tiny --device cpu --batch-size 4 --group-size 2 --max-new-tokens 4
            --steps 2 --gradient-checkpointing off)
  GRPO_15B=(--shape tiny --device cpu --batch-size 4 --group-size 2 --max-new-tokens 4
            --gradient-checkpointing on)
  SERVER=(--pairs 1 --rm-requests 16 --rm-clients 4 --big-batch 8 --big-samples 16
          --hidden 32 --layers 1)
  TRAIN=(--hidden 32 --layers 1 --batch-size 4 --steps 3 --warmup 1 --pairs 1 --rows 16)
  SIZES=(--hidden 32 --layers 1 --k 2 --batch-sizes 1 4 --samples 8 --repeats 1)
  run() { part "$@" & }
else
  DEV=cuda
  GRPO_05B=()
  GRPO_15B=(--gradient-checkpointing on off)  # the run likelier to fit first
  SERVER=(--pairs 2 --rm-requests 512 --big-samples 2048 --hidden 1024 --layers 12)
  TRAIN=(--hidden 1024 --layers 12 --batch-size 64 --steps 25 --warmup 5 --pairs 2
         --rows 1600)
  SIZES=(--hidden 1024 --layers 12 --k 4 --batch-sizes 1 4 16 64 256 --samples 256
         --repeats 2)
  run() { part "$@"; }
fi

[ "$LIST" = 1 ] || {
  if [ "$TINY" = 1 ]; then echo "tiny: every part on the CPU"
  else nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; fi
  timeout 20 $PY -c "import torch; from importlib.metadata import version as v
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers',
      v('transformers'), 'trl', v('trl'))"
} >"$LOGS/environment.log" 2>&1
[ "$LIST" = 1 ] || cat "$LOGS/environment.log"

run grpo_0.5b 300 $PY benchmarks/bench_trainer_vs_trl.py --setup qwen2.5-0.5b \
  "${GRPO_05B[@]}"
run server 250 $PY benchmarks/bench_server.py --device $DEV --skip-overhead \
  --rm-parts clients,large "${SERVER[@]}"
run rm_train 45 $PY benchmarks/bench_rm_train_vs_trl.py --device $DEV "${TRAIN[@]}"
run prm_train 45 $PY benchmarks/bench_prm_train_vs_trl.py --device $DEV "${TRAIN[@]}"
run batch_sizes 75 $PY benchmarks/bench_rm_batch_sizes.py --device $DEV "${SIZES[@]}"
run grpo_1.5b 290 $PY benchmarks/bench_trainer_vs_trl.py --setup qwen2.5-1.5b \
  "${GRPO_15B[@]}"
run tests 40 $PY -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_paths.py \
  tests/test_models_training.py tests/test_trainer_vllm.py
wait
