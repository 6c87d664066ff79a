# Sourced by the shell tests (tests/cli/cli_test.sh, tests/scripts/gpu_script_args_test.sh): a
# scratch folder `$tmp` removed on exit, the `passes` / `failures` counts, and
#   expect_run NAME WANT_EXIT PATTERN -- COMMAND...
# which runs COMMAND and counts a pass when it exits WANT_EXIT and its output (stdout and stderr)
# matches the extended regular expression PATTERN; otherwise it prints the output's head.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passes=0
expect_run() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $want), output:"
    echo "$out" | head -20
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}
