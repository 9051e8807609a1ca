#!/usr/bin/env bash
# For a GPU node without internet, step 1 of 2, on a connected machine (any x86-64 Linux
# with pip and the package index): download a lock's wheels (cp312, every manylinux tag:
# pip matches each manylinux_2_N exactly) into .gpu/NAME/, as one tar with its checksum
# (.gpu/NAME/payload.sha256) cut into pieces .gpu/NAME/pNN/part.NN, for media or transfer
# limits (PIECE_SIZE, a size as split(1) reads it; default 56m). Carry .gpu/NAME/ to the
# node by any means (rsync, a disk, a file-transfer service that caps a file's size), then
# install there with install.sh. Several locks may share a NAME (they install together).
# Usage, from the project root:
#   bash envs/offline-gpu/fetch.sh vllm envs/offline-gpu/vllm-0.26-cuda13-torch2.11.txt envs/offline-gpu/snakemake.txt
#   bash envs/offline-gpu/fetch.sh extras envs/offline-gpu/lmeval-lmcache-cuda13-torch2.11.txt
#   bash envs/offline-gpu/fetch.sh sglang envs/offline-gpu/sglang-0.5.17-cuda13-torch2.11.txt
set -euo pipefail
name=$1; shift
piece=${PIECE_SIZE:-56m}
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
dest=.gpu/$name; mkdir -p "$dest/wheels"
P=(--python-version 3.12 --implementation cp --only-binary=:all: --no-deps --platform any
   --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for n in 39 38 37 36 35 34 33 32 31 30 29 28 27 26 25 24 17 12 5; do P+=(--platform "manylinux_2_${n}_x86_64"); done
# source releases only (Snakemake's connection_pool, lm-eval's sqlitedict and word2number):
# built into pure-Python wheels here
SDIST='^(connection_pool|sqlitedict|word2number)=='
for lock in "$@"; do
  grep -vE "$SDIST" "$lock" > "$dest/req.txt"
  pip download -q "${P[@]}" -d "$dest/wheels" -r "$dest/req.txt" 2>&1 | grep -v '^WARNING: Location' || true
  for pin in $(grep -E "$SDIST" "$lock" || true); do (cd "$dest/wheels" && pip wheel -q --no-deps "$pin"); done
done
rm -rf "$dest"/p[0-9]*; tar cf "$dest/payload.tar" -C "$dest" wheels
(cd "$dest" && sha256sum payload.tar > payload.sha256 && split -b "$piece" -d payload.tar part. && rm payload.tar)
for f in "$dest"/part.*; do d=$dest/p${f##*.}; mkdir -p "$d" && mv "$f" "$d/"; done
echo "$(ls "$dest/wheels" | wc -l) wheels, $(du -sh "$dest/wheels" | cut -f1), pieces of $piece: $(cd "$dest" && ls -d p[0-9]* | tr '\n' ' ')"
