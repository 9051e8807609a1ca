#!/usr/bin/env bash
# On a lent 4-GPU machine with vLLM staged (envs/lent-gpu/stage.sh, install.sh into
# /tmp/vllm-site), from a copy of the project: the outside-load calibration
# (tests/benchmarks/outside_load_calibration.py), then a single-node run of the vLLM weeks
# whose rows were warned of outside load (week01, week13 TP 1/2/4, week16 P/D and its
# baseline), side by side on the four GPUs. Everything it writes goes to OUT (default ~/out).
# Usage: setsid bash envs/lent-gpu/conditions-run.sh [OUT] &
set -uo pipefail
out=${1:-$HOME/out}; mkdir -p "$out"
export PYTHONPATH=/tmp/vllm-site
date +%s > "$out/started"
python3 tests/benchmarks/outside_load_calibration.py --shape llama31_8b --gpus 0,1,2,3 \
  --hogs 32,56,60,62,64 --repeats 3 --prompts 48 --rate 8 --out "$out/calibration.json" > "$out/calibration.log" 2>&1
date +%s > "$out/calibrated"
python3 -m snakemake --profile profiles/single-node --resources gpu=8 --configfile config/config.yaml \
  config/gpu-check.yaml --config 'run=[week13,week01,week16]' --keep-going > "$out/run.log" 2>&1
tar czf "$out/tables.tgz" results/*/metrics.csv results/*/*.png results/*/store/*/record.json \
  results/*/store/sessions/*/timing.json logs 2>/dev/null
date +%s > "$out/done"
