#!/usr/bin/env bash
# On the lent machine while course-run.sh runs: wait up to SECONDS (less if the run ends),
# say where the run stands, then pack what it measured so far and leave the pack in OUT in
# pieces of at most 15 MiB (a device call returns files of up to 16 MiB). Every poll thus
# brings the latest pack back, so the slot's device time may end after any call.
# With CACHES=1 (the slot's last poll) the engines' caches come back too (pack-caches.sh).
# Reassemble: cat course.tgz.* > .gpu/resume/course.tgz (caches.tgz.* likewise)
# Usage: [CACHES=1] bash envs/lent-gpu/poll.sh SECONDS [KEEP] [OUT]
set -uo pipefail
wait_s=$1; keep=${2:-$HOME/keep}; out=${3:-$OUT}
end=$(( $(date +%s) + wait_s ))
while [ "$(date +%s)" -lt "$end" ] && [ ! -f "$keep/rc" ]; do sleep 5; done
echo "== $(date -u +%T) run: $(cat "$keep/rc" 2>/dev/null | sed 's/^/ended, rc /' || echo going on)"
if [ ! -f "$keep/run.log" ]; then
  tail -n 5 "$keep/install.log" 2>/dev/null
  exit 0
fi
grep -E "steps \(|servelab" "$keep/run.log" | tail -n 20
# its own pack (course-run.sh packs into KEEP on its own clock; two packers never share a file)
mkdir -p "$keep/poll" "$out"
KEEP=$keep bash "$(dirname "$0")/pack-results.sh" "$keep/poll" || exit 1
rm -f "$out"/course.tgz.* "$out"/caches.tgz.*
split -b 15M -d -a 1 "$keep/poll/course.tgz" "$out/course.tgz."
if [ "${CACHES:-0}" = 1 ]; then
  # what a call returns: 64 MiB in all, so the caches get what the results' pack leaves
  left=$(( 60 - $(stat -c %s "$keep/poll/course.tgz") / 1048576 ))
  bash "$(dirname "$0")/pack-caches.sh" "$keep/poll" "$left" && split -b 15M -d -a 1 "$keep/poll/caches.tgz" "$out/caches.tgz."
fi
ls "$out"
