#!/usr/bin/env bash
# On the lent machine: keep carried parts outside the work tree, where they survive
# between calls while the machine stays warm (~30 s). Carry .gpu/NAME/pNN and envs/.
# Usage: bash envs/lent-gpu/stage.sh NAME pNN [pNN ...]
set -euo pipefail
name=$1; shift; mkdir -p "$HOME/staged/$name"
for p in "$@"; do mv ".gpu/$name/$p"/part.* "$HOME/staged/$name/"; done
echo "staged $name: $(ls "$HOME/staged/$name" | tr '\n' ' ')"
