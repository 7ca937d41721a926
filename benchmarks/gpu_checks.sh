#!/usr/bin/env bash
# The GPU paths in one go, on a machine with one CUDA device: the tests marked `gpu`, reward-model
# and process-reward-model training against their peers in bf16, reward-model scoring by batch
# size (one model against a K-head ensemble), the reward server with a reward model on the GPU,
# and a short GRPO run with generation on the GPU. Every part has its own time limit and log:
#
#     bash benchmarks/gpu_checks.sh LOGDIR [SECONDS_SCALE]
#
# SECONDS_SCALE (default 1) stretches or shrinks every part's time limit. The logs are
# LOGDIR/<part>.log; a part that fails or runs out of time leaves the others standing.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${1:?usage: gpu_checks.sh LOGDIR [SECONDS_SCALE]}
SCALE=${2:-1}
PY=${PYTHON:-python3}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false TRANSFORMERS_VERBOSITY=error \
       HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1

part() {  # part NAME SECONDS COMMAND...
  local name=$1 limit
  limit=$(awk "BEGIN {print int($2 * $SCALE)}")
  shift 2
  echo "== $name (limit ${limit} s): $*"
  local start=$SECONDS
  timeout -k 10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc in $((SECONDS - start)) s"
  tail -n 12 "$LOGS/$name.log" | sed 's/^/   | /'
}

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
} >"$LOGS/environment.log" 2>&1
cat "$LOGS/environment.log"

part server 220 $PY benchmarks/bench_server.py --device cuda --skip-overhead --pairs 2 \
  --rm-requests 1024 --big-samples 2048 --hidden 1024 --layers 12 \
  --rm-parts clients,ceiling,large
part rm_train 80 $PY benchmarks/bench_rm_train_vs_trl.py --device cuda --hidden 1024 \
  --layers 12 --batch-size 64 --steps 25 --warmup 5 --pairs 2
part prm_train 70 $PY benchmarks/bench_prm_train_vs_trl.py --device cuda --hidden 1024 \
  --layers 12 --batch-size 64 --steps 25 --warmup 5 --pairs 2
part batch_sizes 90 $PY benchmarks/bench_rm_batch_sizes.py --device cuda --hidden 1024 \
  --layers 12 --k 4 --batch-sizes 1 4 16 64 256 --samples 512 --repeats 2
part tests 80 $PY -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_paths.py \
  tests/test_models_training.py tests/test_trainer_vllm.py
part grpo 50 $PY -m rewardkit train grpo --config examples/arithmetic_grpo.yaml --device cuda \
  --dtype bfloat16 --steps 20 --eval-every 0 --output "$LOGS/grpo_run" --quiet
if [ -f "$LOGS/grpo_run/metrics.jsonl" ]; then
  cp "$LOGS/grpo_run/metrics.jsonl" "$LOGS/grpo_metrics.jsonl"
  rm -rf "$LOGS/grpo_run"
fi
