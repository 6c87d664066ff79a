#!/usr/bin/env bash
# The device scripts' argument checks (no GPU needed: each case exits before building anything):
# a call to the GPU host is too scarce to lose to a typo, so a bad argument must stop the script
# here, with exit 2 and a message that says what to fix.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/expect.sh
source tests/expect.sh

expect_run issues_no_args 2 "usage: scripts/gpu/issues_check.sh OUTDIR" -- scripts/gpu/issues_check.sh
expect_run issues_three_args 2 "usage:" -- scripts/gpu/issues_check.sh "$tmp/o" 300 extra
expect_run issues_seconds_word 2 "SECONDS must be a whole number of at least 60, got 'soon'" -- \
  scripts/gpu/issues_check.sh "$tmp/o" soon
expect_run issues_seconds_small 2 "at least 60, got '59'" -- scripts/gpu/issues_check.sh "$tmp/o" 59
expect_run session_no_args 2 "usage: scripts/gpu/session_check.sh OUTDIR" -- scripts/gpu/session_check.sh
expect_run session_three_args 2 "usage:" -- scripts/gpu/session_check.sh "$tmp/o" 300 extra
expect_run session_seconds_word 2 "SECONDS must be a whole number of at least 150, got 'all'" -- \
  scripts/gpu/session_check.sh "$tmp/o" all
expect_run session_seconds_small 2 "at least 150, got '90'" -- scripts/gpu/session_check.sh "$tmp/o" 90
# This machine has no H200 (nor any GPU): the card check stops the script before anything runs.
expect_run session_only_on_other_card 3 "the GPU is not an H200 \\(SESSION_CHECK_ONLY_ON\\): nothing run" -- \
  env SESSION_CHECK_ONLY_ON=H200 scripts/gpu/session_check.sh "$tmp/o"
expect_run ab_base_not_a_commit 2 "'no-such-rev' is not a commit" -- \
  scripts/gpu/ab_base.sh no-such-rev "$tmp/base"
mkdir -p "$tmp/full" && touch "$tmp/full/x"
expect_run ab_base_dir_not_empty 2 "exists and is not empty" -- scripts/gpu/ab_base.sh HEAD "$tmp/full"
expect_run ab_no_args 2 "usage:" -- scripts/gpu/ab.sh
expect_run ab_base_missing 2 "is not a directory" -- scripts/gpu/ab.sh "$tmp/none" "$tmp/out"
mkdir -p "$tmp/empty"
expect_run ab_base_empty 2 "holds no files" -- scripts/gpu/ab.sh "$tmp/empty" "$tmp/out"
expect_run ab_bad_passes 2 "AB_PASSES must be a positive integer" -- \
  env AB_PASSES=two scripts/gpu/ab.sh "$tmp/full" "$tmp/out"

echo "gpu_script_args_test: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
