#!/usr/bin/env bash
# Runs every CPU test, then every CPU test again built with AddressSanitizer + UndefinedBehavior-
# Sanitizer, then the fuzz targets for a short while. Assumes scripts/setup.sh has run.
#   scripts/test.sh                 # all tests, all tests sanitized, 20 s of fuzzing per target
#   ROOFLINE_SANITIZE=0 scripts/test.sh       # skip the sanitized build (~15 min on 2 cores)
#   ROOFLINE_FUZZ_SECONDS=0 scripts/test.sh   # skip fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

ctest --preset cpu

if [ "${ROOFLINE_SANITIZE:-1}" != 0 ]; then
  cmake --preset sanitize >/dev/null
  cmake --build --preset sanitize
  # Any report fails its test: UBSan stops at the first (-fno-sanitize-recover), ASan always does.
  UBSAN_OPTIONS=print_stacktrace=1 ctest --preset sanitize
fi

fuzz_seconds=${ROOFLINE_FUZZ_SECONDS:-20}
if [ "$fuzz_seconds" -gt 0 ]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j2
  for target in build/fuzz/fuzz/*_fuzz; do
    name=$(basename "$target")
    corpus=fuzz/corpus/${name%_fuzz}
    work=$(mktemp -d)
    cp -r "$corpus"/. "$work"/ 2>/dev/null || true
    echo "fuzz: $name for ${fuzz_seconds}s"
    "$target" -max_total_time="$fuzz_seconds" -print_final_stats=0 "$work" 2>&1 | tail -n 2
    rm -rf "$work"
  done
fi
