#!/usr/bin/env bash
# On a lent GPU machine, once the parts of vllm, extras (lm-eval + LMCache) and sglang are
# staged (stage.sh): install them, then the whole course from one command, the GPU check
# with run_what_fits (config/gpu-check.yaml), from a copy of the project in ~/sl. Writes
# only under KEEP (default ~/keep: a lent machine empties $OUT at every call): install.log,
# run.log, rc, timestamps; pack-results.sh packs what it measured. A course longer than
# one lent slot goes on in the next: carry the packed .gpu/resume/course.tgz with the
# call that starts this script, and the run measures only what its store lacks; with
# .gpu/resume/caches.tgz (pack-caches.sh) it also starts from the first slot's caches.
# Another study on the same recipe: NAMES (what to install, default all three) and
# OVERLAYS (its config files after config/config.yaml), e.g. seed 002's search:
#   NAMES=vllm OVERLAYS=config/phi4-search-gpu.yaml setsid bash envs/lent-gpu/course-run.sh
# Usage: [NAMES=...] [OVERLAYS=...] setsid bash envs/lent-gpu/course-run.sh [KEEP] > /dev/null 2>&1 &
set -uo pipefail
keep=${1:-$HOME/keep}; mkdir -p "$keep"
# the carried checksums, kept at once: the next call's work tree lacks them, and the
# installs below outlast this call (on 2026-11-27 SGLang's check then found no file)
for name in vllm extras sglang; do
  [ -f ".gpu/$name/payload.sha256" ] && mkdir -p "$HOME/staged/$name" && cp ".gpu/$name/payload.sha256" "$HOME/staged/$name/"
done
[ -f .gpu/resume/course.tgz ] && cp .gpu/resume/course.tgz "$keep/resume.tgz"
[ -s .gpu/resume/caches.tgz ] && cp .gpu/resume/caches.tgz "$keep/resume-caches.tgz"
date +%s > "$keep/install-started"
names=${NAMES:-vllm extras sglang}
overlays=${OVERLAYS:-config/gpu-check.yaml envs/lent-gpu/engines.yaml}
# extras (lm-eval, LMCache) go beside vLLM; SGLang into a target of its own (engines.yaml)
for name in $names; do
  target=/tmp/vllm-site; [ "$name" = sglang ] && target=/tmp/sglang-site
  bash envs/lent-gpu/install.sh "$name" "$target" >> "$keep/install.log" 2>&1 || { echo install > "$keep/rc"; exit 1; }
done
# a fresh copy of the project, but ~/sl/.cache stays: jit-prebuild.sh may be building into it
mkdir -p "$HOME/sl" && find "$HOME/sl" -mindepth 1 -maxdepth 1 ! -name .cache -exec rm -rf {} +
tar cf - --exclude=./.gpu . | tar xf - -C "$HOME/sl"
cd "$HOME/sl"
[ -f "$keep/resume.tgz" ] && tar xzf "$keep/resume.tgz" results
# the first slot's engine caches (pack-caches.sh): gzip'd tars one after another
[ -f "$keep/resume-caches.tgz" ] && tar xzif "$keep/resume-caches.tgz"
export PYTHONPATH=/tmp/vllm-site
gpus=$(nvidia-smi -L | wc -l)
date +%s > "$keep/run-started"
# a pack of what is measured so far every two minutes, so the slot's last call only copies
# $keep/course.tgz into $OUT, however early the device time ends
pack() { KEEP=$keep bash envs/lent-gpu/pack-results.sh "$keep" > "$keep/pack.log" 2>&1; }
( while sleep 120; do pack; done ) &
packer=$!
# the command as a user types it on a GPU box (README), with the lent machine's SGLang target
python3 -m snakemake --profile profiles/single-node --resources gpu=$((2 * gpus)) \
  --configfile config/config.yaml $overlays > "$keep/run.log" 2>&1
echo $? > "$keep/rc"
kill "$packer" 2>/dev/null
pack
date +%s > "$keep/run-ended"
