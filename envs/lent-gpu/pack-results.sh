#!/usr/bin/env bash
# On the lent machine, during or after course-run.sh: pack what the run measured so far
# into DEST/course.tgz (default $OUT): results/ (the store's raw JSON, records and server
# logs; the tables, figures and timings), the session logs and the run's log.
# Carried into the next slot as .gpu/resume/course.tgz, course-run.sh unpacks it before
# the run, which then measures only what the store lacks: a course longer than one lent
# slot, in two. Point files are written whole (servelab.atomic), so a pack taken while the
# run goes on holds no half-written point.
# A file over BIG_MIB (default 8) stays on the box, named with its size in the pack's
# logs/left-out-of-pack.txt: week 2's torch-profiler traces are 7-11 MB gzipped for the
# tiny model on a CPU, more for an 8B on a GPU, and a pack must come back in one device
# call (64 MiB) within a poll's time. A point's
# bench.json always goes: the next slot's store counts it as measured.
# Usage: [BIG_MIB=8] bash envs/lent-gpu/pack-results.sh [DEST]
set -euo pipefail
dest=${1:-$OUT}; keep=${KEEP:-$HOME/keep}; big_mib=${BIG_MIB:-8}; mkdir -p "$dest"
cd "$HOME/sl"
mkdir -p logs
cp -f "$keep/run.log" logs/course-run.log 2>/dev/null || true
cp -f "$keep/jit-prebuild.log" logs/jit-prebuild.log 2>/dev/null || true
find results logs -type f -size +"$((big_mib * 1024))"k ! -name bench.json -printf '%s\t%p\n' 2>/dev/null \
  | sort -rn > logs/left-out-of-pack.txt || true
cut -f2 logs/left-out-of-pack.txt > "$dest/.left-out"
# tar's status 1: a file changed while it was read (the run goes on); the pack stands
tar czf "$dest/course.tgz.part" --warning=no-file-changed -X "$dest/.left-out" results logs || [ $? -eq 1 ]
mv "$dest/course.tgz.part" "$dest/course.tgz"; rm -f "$dest/.left-out"
echo "packed $(tar tzf "$dest/course.tgz" | grep -c 'bench.json$') measured point(s) into $dest/course.tgz ($(du -h "$dest/course.tgz" | cut -f1))"
if [ -s logs/left-out-of-pack.txt ]; then
  echo "left on the box, over $big_mib MiB each ($(wc -l < logs/left-out-of-pack.txt) file(s), named in logs/left-out-of-pack.txt):" \
    "$(awk -F'\t' '{s += $1} END {printf "%d MiB", s / 1048576}' logs/left-out-of-pack.txt) in all, largest $(head -n 1 logs/left-out-of-pack.txt | cut -f2)"
fi
