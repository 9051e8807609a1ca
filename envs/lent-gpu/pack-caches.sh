#!/usr/bin/env bash
# On the lent machine, at the end of a slot: pack the engines' caches of the run in ~/sl
# (servelab.run.caches: FlashInfer's JIT builds, vLLM's compiled graphs with the compile
# gate's markers, Triton's and Inductor's kernels) into DEST/caches.tgz, as much as fits
# LIMIT MiB compressed (a device call carries 64 MiB in all, the work tree and the results'
# pack included), in that order: a FlashInfer JIT build is the dearest to redo (203 s for
# the TP 2 all-reduce fusion on 2026-11-27), an Inductor kernel the cheapest. A gate's
# markers go only with the compiled graphs they vouch for. Carried as
# .gpu/resume/caches.tgz, course-run.sh unpacks it: the next slot goes on as one run would,
# with the caches the first filled, not as a fresh box.
# Usage: bash envs/lent-gpu/pack-caches.sh [DEST] [LIMIT_MIB]
set -euo pipefail
dest=${1:-$OUT}; limit_mib=${2:-44}; limit=$((limit_mib * 1048576))
mkdir -p "$dest"; cd "$HOME/sl"
work=$(mktemp -d); total=0; n=0
for units in flashinfer "vllm gates" triton inductor; do
  for stack in .cache/*/; do
    paths=(); for u in $units; do [ -d "$stack$u" ] && paths+=("$stack$u"); done
    [ ${#paths[@]} -gt 0 ] || continue
    n=$((n + 1)); tar czf "$work/$n.tgz" "${paths[@]}"
    size=$(stat -c %s "$work/$n.tgz")
    if [ $((total + size)) -le "$limit" ]; then
      total=$((total + size)); echo "packed ${paths[*]} ($((size / 1024)) KiB)"
    else
      rm "$work/$n.tgz"; echo "left out ${paths[*]} ($((size / 1024)) KiB: over ${limit_mib} MiB in all)"
    fi
  done
done
# gzip'd tars one after another: `tar -xzi` (--ignore-zeros) reads them as one
find "$work" -name '*.tgz' | sort -V | xargs -r cat > "$dest/caches.tgz.part"
mv "$dest/caches.tgz.part" "$dest/caches.tgz"; rm -rf "$work"
echo "caches: $((total / 1048576)) MiB in $dest/caches.tgz"
