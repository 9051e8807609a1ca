#!/usr/bin/env bash
# On the lent machine, during or after course-run.sh: pack what the run measured so far
# into DEST/course.tgz (default $OUT): results/ whole (the store's raw JSON, records and
# server logs; the tables, figures and timings), the session logs and the run's log.
# Carried into the next slot as .gpu/resume/course.tgz, course-run.sh unpacks it before
# the run, which then measures only what the store lacks: a course longer than one lent
# slot, in two. Point files are written whole (servelab.atomic), so a pack taken while the
# run goes on holds no half-written point.
# Usage: bash envs/lent-gpu/pack-results.sh [DEST]
set -euo pipefail
dest=${1:-$OUT}; keep=${KEEP:-$HOME/keep}; mkdir -p "$dest"
cd "$HOME/sl"
cp -f "$keep/run.log" logs/course-run.log 2>/dev/null || true
# tar's status 1: a file changed while it was read (the run goes on); the pack stands
tar czf "$dest/course.tgz.part" --warning=no-file-changed results logs || [ $? -eq 1 ]
mv "$dest/course.tgz.part" "$dest/course.tgz"
echo "packed $(tar tzf "$dest/course.tgz" | grep -c 'bench.json$') measured point(s) into $dest/course.tgz ($(du -h "$dest/course.tgz" | cut -f1))"
