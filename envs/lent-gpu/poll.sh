#!/usr/bin/env bash
# On the lent machine while course-run.sh runs: return within SECONDS whatever happens,
# with where the run stands and the latest pack of what it measured in OUT, in pieces of at
# most 15 MiB (a device call returns files of up to 16 MiB, 64 MiB in all). It waits (less
# if the run ends), keeping PACK_S seconds (default 60) for packing: a fresh pack if one
# finishes in time, else course-run.sh's own, taken every two minutes. Give SECONDS under
# the call's limit and start the next call at once: a lent machine goes back 30 s after a
# call returns, and a call killed at its limit brings nothing back (2026-11-27, slot 2: a
# pack of the whole results/, most likely week 2's profiler traces, outlasted the 600 s
# call; the box, its run and its caches were gone before the next call).
# With CACHES=1 (the slot's last poll) the engines' caches come back too (pack-caches.sh),
# in what the results' pack leaves of the call's 64 MiB; give that poll PACK_S=150.
# With PACK=0 it only says where the run stands and brings nothing back. Use it only where
# losing the run costs nothing: whether the machine stays depends on the gap between calls,
# not on what came back. On 2026-11-28 it went back twice after a pack came back, and twice
# (the 2x H200 seed-002 rerun) after PACK=0 polls, each time 65 s or more after the call
# returned; those two runs came back with nothing. Every poll packs by default.
# Reassemble: cat course.tgz.* > .gpu/resume/course.tgz (caches.tgz.* likewise)
# Usage: [PACK=0] [CACHES=1] [PACK_S=60] bash envs/lent-gpu/poll.sh SECONDS [KEEP] [OUT]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
budget=$1; keep=${2:-$HOME/keep}; out=${3:-$OUT}; pack_s=${PACK_S:-60}
[ "${PACK:-1}" = 0 ] && pack_s=1
start=$(date +%s); deadline=$((start + budget))
# no run here: a fresh machine (the one that ran it went back 30 s after the last call).
# Say so at once: on 2026-11-28 a poll on such a machine waited out its 380 s for an rc
# file no run would write.
if [ ! -f "$keep/install-started" ] && [ ! -f "$keep/run.log" ]; then
  echo "no run on this machine ($keep has none): a fresh machine, the one that ran it went back"
  exit 2
fi
left() { echo $((deadline - $(date +%s))); }
while [ "$(left)" -gt "$pack_s" ] && [ ! -f "$keep/rc" ]; do sleep 1; done
echo "== $(date -u +%T) run: $(cat "$keep/rc" 2>/dev/null | sed 's/^/ended, rc /' || echo going on)"
if [ ! -f "$keep/run.log" ]; then
  tail -n 5 "$keep/install.log" 2>/dev/null
  exit 0
fi
grep -E "steps \(|servelab" "$keep/run.log" | grep -v "waiting for server on port" | tail -n 20
grep -h "prebuild-jit" "$keep/jit-prebuild.log" 2>/dev/null | tail -n 4
if [ "${PACK:-1}" = 0 ]; then
  echo "== status only (PACK=0): nothing comes back; poll took $(( $(date +%s) - start )) s of $budget"
  exit 0
fi
mkdir -p "$keep/poll" "$out"
rm -f "$out"/course.tgz.* "$out"/caches.tgz.*
# its own pack (course-run.sh packs into KEEP on its own clock; two packers never share a file)
pack=$keep/poll/course.tgz
rm -f "$pack"
if [ "$(left)" -gt 5 ]; then
  KEEP=$keep timeout $(($(left) - 5)) bash "$here/pack-results.sh" "$keep/poll"
fi
if [ ! -s "$pack" ]; then
  pack=$keep/course.tgz
  [ -s "$pack" ] || { echo "no pack: a fresh one did not finish in time and course-run.sh has made none"; exit 1; }
  echo "a fresh pack did not finish in time: course-run.sh's of $(date -u -r "$pack" +%T) comes back"
fi
split -b 15M -d -a 1 "$pack" "$out/course.tgz."
if [ "${CACHES:-0}" = 1 ] && [ "$(left)" -gt 5 ]; then
  room=$(( 60 - $(stat -c %s "$pack") / 1048576 ))
  timeout $(($(left) - 5)) bash "$here/pack-caches.sh" "$keep/poll" "$room" \
    && split -b 15M -d -a 1 "$keep/poll/caches.tgz" "$out/caches.tgz." \
    || echo "the caches did not come back: their pack did not finish in time"
fi
ls "$out"; echo "== poll took $(( $(date +%s) - start )) s of $budget"
