#!/usr/bin/env bash
# For a GPU node without internet, step 2 of 2, on the node: join the pieces fetch.sh made
# (DIR/pNN/part.NN, or the part.NN files side by side in DIR; default DIR .gpu/NAME in the
# project), check them against DIR/payload.sha256, unpack, and install the wheels into
# TARGET with pip, no index (the node's own torch stays). Idempotent; several NAMEs may
# share a TARGET (extras on top of vllm); two installs of one NAME at once take turns.
# Each engine gets its own TARGET where their pins differ (vLLM 0.26 and SGLang 0.5.17:
# config/engines-own-targets.yaml points SGLang's processes at its own).
# Usage: bash envs/offline-gpu/install.sh NAME TARGET [DIR]
#   bash envs/offline-gpu/install.sh vllm /opt/vllm-site && bash envs/offline-gpu/install.sh extras /opt/vllm-site
#   bash envs/offline-gpu/install.sh sglang /opt/sglang-site
#   bash envs/offline-gpu/install.sh aiperf /opt/aiperf-site   (SERVELAB_AIPERF=/opt/aiperf-site/bin/aiperf)
# then PYTHONPATH=/opt/vllm-site (and PATH=/opt/vllm-site/bin:$PATH) for the run.
set -euo pipefail
name=$1 target=$2 src=$(realpath "${3:-.gpu/$1}")
work=${WORK:-$HOME/unpack}
mkdir -p "$work"; exec 9> "$work/.$name.lock"; flock 9
if [ ! -f "$target/.installed-$name" ]; then
  sums=$src/payload.sha256; [ -f "$sums" ] || { echo "install.sh: no $sums: carry it with the pieces"; exit 1; }
  mkdir -p "$work/$name"
  # the pieces in order, by their number (part.NN, in pNN/ or side by side)
  pieces=$(cd "$src" && find . -maxdepth 2 -type f -name 'part.*' | awk -F. '{print $NF "\t" $0}' | sort -n | cut -f2)
  [ -n "$pieces" ] || { echo "install.sh: no pieces in $src"; exit 1; }
  (cd "$src" && cat $pieces) > "$work/$name/payload.tar"
  (cd "$work/$name" && sha256sum -c "$sums") || { echo "install.sh: $name: a piece is missing or damaged"; exit 1; }
  tar xf "$work/$name/payload.tar" -C "$work/$name" && rm "$work/$name/payload.tar"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$target" "$work/$name"/wheels/*.whl
  # bytecode once: where PYTHONDONTWRITEBYTECODE is set (some container images), every
  # process would compile the sources again (an uncompiled sglang.bench_serving took 75-80 s
  # to start on an H100 box, its 16-prompt points 7-22 s; the server's start paid the same)
  python3 -m compileall -q -j 0 "$target" >/dev/null || true
  # console scripts that find their own target (pip --target leaves that to PYTHONPATH): a
  # client in a target of its own (AIPerf) then runs as TARGET/bin/NAME, its pins unseen by vLLM's
  for script in "$target"/bin/*; do
    head -1 "$script" | grep -q '^#!.*python' && ! grep -q "^sys.path.insert(0, '$target')" "$script" &&
      sed -i "1a import sys\nsys.path.insert(0, '$target')" "$script"
  done
  touch "$target/.installed-$name"
fi
echo "$name installed in $target"
