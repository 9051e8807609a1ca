#!/usr/bin/env bash
# On the lent machine, as soon as vLLM's parts are staged (extras and SGLang may still be
# on their way): install vLLM and build FlashInfer's JIT modules that the course's vLLM
# starts would otherwise build while holding their GPUs (`servelab prebuild-jit`; on
# 2026-11-27 a fresh box's TP 4 start held 4 GPUs 189 s for the all-reduce fusion and
# most likely ~114 s for the sampler). nvcc needs no GPU, so the build runs while the
# staging goes on, into ~/sl/.cache where the run's sessions look (course-run.sh keeps
# that folder). A start that comes while a module is still building waits on FlashInfer's
# own lock, then loads it. Writes KEEP/jit-prebuild.log and KEEP/jit-prebuild.rc.
# OVERLAYS: the run's config files after config/config.yaml, as for course-run.sh.
# Usage: [OVERLAYS=...] setsid bash envs/lent-gpu/jit-prebuild.sh [KEEP] > /dev/null 2>&1 < /dev/null &
set -uo pipefail
keep=${1:-$HOME/keep}; mkdir -p "$keep"; rm -f "$keep/jit-prebuild.rc"
log=$keep/jit-prebuild.log
[ -f .gpu/vllm/payload.sha256 ] && mkdir -p "$HOME/staged/vllm" && cp .gpu/vllm/payload.sha256 "$HOME/staged/vllm/"
# its own copy of the project: the next call's work tree replaces this one
src=$HOME/prebuild-src; rm -rf "$src" && mkdir -p "$src" && tar cf - --exclude=./.gpu . | tar xf - -C "$src"
cd "$src"
{ date -u +"%T start"; bash envs/lent-gpu/install.sh vllm /tmp/vllm-site; } > "$log" 2>&1 \
  || { echo install > "$keep/jit-prebuild.rc"; exit 1; }
mkdir -p "$HOME/sl/.cache"
PYTHONPATH=/tmp/vllm-site python3 -m servelab prebuild-jit --cache "$HOME/sl/.cache" \
  config/config.yaml ${OVERLAYS:-config/gpu-check.yaml envs/lent-gpu/engines.yaml} >> "$log" 2>&1
echo $? > "$keep/jit-prebuild.rc"
date -u +"%T end" >> "$log"
