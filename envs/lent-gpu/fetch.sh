#!/usr/bin/env bash
# On a machine with the package index: download a lock's wheels (cp312, every manylinux
# tag: pip matches each manylinux_2_N exactly) into .gpu/NAME/, as one tar split in
# 56 MiB parts (a device call carries 64 MiB, the work tree (~4 MiB) included). Usage, from the project root:
#   bash envs/lent-gpu/fetch.sh vllm envs/lent-gpu/vllm-0.26-image-lacks.txt envs/lent-gpu/snakemake.txt
#   bash envs/lent-gpu/fetch.sh sglang envs/lent-gpu/sglang-0.5.17-image-lacks.txt
set -euo pipefail
name=$1; shift
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
out=.gpu/$name; mkdir -p "$out/wheels"
P=(--python-version 3.12 --implementation cp --only-binary=:all: --no-deps --platform any
   --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for n in 39 38 37 36 35 34 33 32 31 30 29 28 27 26 25 24 17 12 5; do P+=(--platform "manylinux_2_${n}_x86_64"); done
# source releases only (Snakemake's connection_pool, lm-eval's sqlitedict and word2number):
# built into pure-Python wheels here
SDIST='^(connection_pool|sqlitedict|word2number)=='
for lock in "$@"; do
  grep -vE "$SDIST" "$lock" > "$out/req.txt"
  pip download -q "${P[@]}" -d "$out/wheels" -r "$out/req.txt" 2>&1 | grep -v '^WARNING: Location' || true
  for pin in $(grep -E "$SDIST" "$lock" || true); do (cd "$out/wheels" && pip wheel -q --no-deps "$pin"); done
done
rm -rf "$out"/p[0-9]*; tar cf "$out/payload.tar" -C "$out" wheels
(cd "$out" && sha256sum payload.tar > payload.sha256 && split -b 56m -d payload.tar part. && rm payload.tar)
for f in "$out"/part.*; do d=$out/p${f##*.}; mkdir -p "$d" && mv "$f" "$d/"; done
echo "$(ls "$out/wheels" | wc -l) wheels, $(du -sh "$out/wheels" | cut -f1), parts: $(cd "$out" && ls -d p[0-9]* | tr '\n' ' ')"
