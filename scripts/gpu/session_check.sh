#!/usr/bin/env bash
# The run a session owes the GPU host when it may get either card and little device time: the
# open issues' figures (scripts/gpu/issues_check.sh) and the whole tree's tests
# (scripts/gpu/check.sh without its benchmark sections), both within SECONDS in all (default
# 490). On an H200, whose figures the issues' goals are, the figures run first; on any other GPU,
# which can only measure the code, the tests run first (two thirds of the time: on an H100 the
# build and ctest alone took ~285 s, before the Hugging Face check). Whichever runs second gets the
# time that is left, and is skipped when that is under a minute. The tests' outputs come back in
# OUTDIR/check.tgz (the device tool brings back at most 8 files a call; check.sh writes more).
# SESSION_CHECK_ONLY_ON=TEXT runs nothing unless the GPU's name holds TEXT (e.g. H200): on another
# card it exits 3 at once, so a call made for the issues' own card, once this card's run is
# recorded, costs only the machine's start.
# Run scripts/stage_deps.sh here first and carry .staged with the call.
#   [SESSION_CHECK_ONLY_ON=H200] scripts/gpu/session_check.sh OUTDIR [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
usage="usage: scripts/gpu/session_check.sh OUTDIR [SECONDS]"
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "$usage" >&2; exit 2; }
limit=${2:-490}
[[ $limit =~ ^[0-9]+$ ]] && [ "$limit" -ge 150 ] ||
  { echo "session_check: SECONDS must be a whole number of at least 150, got '$limit'" >&2; exit 2; }
dest=$1
mkdir -p "$dest" || exit 2
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1)
echo "$gpu" | tee "$dest/gpu.txt"
only=${SESSION_CHECK_ONLY_ON:-}
[ -z "$only" ] || [[ $gpu == *"$only"* ]] ||
  { echo "session_check: the GPU is not an $only (SESSION_CHECK_ONLY_ON): nothing run" >&2; exit 3; }

tests() {  # $1: seconds
  CHECK_SKIP=ops,peers,engine,profile,compare timeout "$1" scripts/gpu/check.sh "$dest/check" \
    > "$dest/check_stdout.txt" 2>&1
  echo "session_check: tests rc=$? at $(elapsed) s"
  # check.sh packs its outputs as it ends; stopped by the timeout it has not, so pack them here
  # (without the Hugging Face check's scratch checkpoints).
  if [ -f "$dest/check/check.tgz" ]; then
    mv "$dest/check/check.tgz" "$dest/check.tgz"
  else
    tar czf "$dest/check.tgz" -C "$dest" --exclude=hf_e2e_models check
  fi && rm -rf "$dest/check"
  tail -n 28 "$dest/check_stdout.txt"
}
figures() {  # $1: seconds
  scripts/gpu/issues_check.sh "$dest" "$1" > "$dest/issues_stdout.txt" 2>&1
  echo "session_check: figures rc=$? at $(elapsed) s"
  tail -n 30 "$dest/issues_stdout.txt"
}
second() {  # $1: the function to run in the time left
  local left=$((limit - $(elapsed)))
  if [ "$left" -ge 60 ]; then "$1" "$left"; else echo "session_check: $1 skipped: ${left} s left"; fi
}
# issues_check.sh stops starting steps past its SECONDS, so it may run a step's length beyond.
if [[ $gpu == *H200* ]]; then
  figures $((limit * 42 / 100))
  second tests
else
  tests $((limit * 66 / 100))
  second figures
fi
echo "session_check: done at $(elapsed) s"
