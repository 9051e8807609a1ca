#!/usr/bin/env bash
# On the lent machine, once every part of NAME is staged: check the parts against
# ~/staged/NAME/payload.sha256 (course-run.sh keeps it there) or the carried
# .gpu/NAME/payload.sha256, unpack, install the wheels into TARGET (the image's
# torch stays). Idempotent; several NAMEs may share a TARGET (extras on top of vllm).
# Usage: bash envs/lent-gpu/install.sh NAME TARGET
set -euo pipefail
name=$1 target=$2 repo=$PWD
# jit-prebuild.sh installs vLLM while the staging goes on: the second caller waits, then finds it done
mkdir -p "$HOME/unpack"; exec 9> "$HOME/unpack/.$name.lock"; flock 9
if [ ! -f "$target/.installed-$name" ]; then
  work=$HOME/unpack/$name; mkdir -p "$work"
  cat "$HOME/staged/$name"/part.* > "$work/payload.tar"
  sums=$HOME/staged/$name/payload.sha256; [ -f "$sums" ] || sums=$repo/.gpu/$name/payload.sha256
  (cd "$work" && sha256sum -c "$sums")
  tar xf "$work/payload.tar" -C "$work" && rm "$work/payload.tar"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$target" "$work"/wheels/*.whl
  # bytecode once: the image sets PYTHONDONTWRITEBYTECODE, so every process would compile
  # the sources again (an uncompiled sglang.bench_serving took 75-80 s to start on an H100
  # box, its 16-prompt points 7-22 s; the server's start paid the same)
  python3 -m compileall -q -j 0 "$target" >/dev/null || true
  touch "$target/.installed-$name"
fi
echo "$name installed in $target"
