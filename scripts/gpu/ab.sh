#!/usr/bin/env bash
# A/B of any benchmark binary in one device run, for a change smaller than the 3-5 % that
# separates two hosts: the working tree ("new") against the same tree with the files under
# BASE_DIR laid over it ("old": copies of the changed files at the base commit, made here by
# scripts/gpu/ab_base.sh BASE_REV BASE_DIR), both built in one build folder, then each argument
# list run alternately old / new / new / old / old / new on the same GPU.
#   AB_TARGET=attention_cuda_bench AB_ARGS="prefill;1 4096" scripts/gpu/ab.sh BASE_DIR OUTDIR
# Several variants at once: scripts/gpu/ab.sh DIR_A DIR_B ... OUTDIR builds the tree with each
# folder's files laid over it in turn, each variant named by its folder's name (which must differ
# from each other and from "new"), and runs them with the tree in the order A B ... new, then
# new ... B A, and so on (one folder: "old", as above).
# AB_TARGET: the CMake target (default roofline, the CLI); AB_ARGS: ";"-separated argument lists
# (default: issue 8's four decode steps through `roofline bench`); AB_PASSES: passes over the
# variants per argument list (default 3); AB_TEST: a test target built and run on the new tree
# first (its result in OUTDIR/ab_test.log and the table); AB_BUILD_DIR / AB_PRESET: the build
# folder and its preset (default build/cuda and cuda, configured against .staged when not
# configured yet). Leaves the working tree as it found it (the build folder then holds the last
# variant's objects of the overlaid files). Writes OUTDIR/ab.txt (every run's output under an
# `== VARIANT: args` line) and prints those lines with the figures last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
usage="usage: [AB_TARGET=T AB_ARGS='a;b'] scripts/gpu/ab.sh BASE_DIR [BASE_DIR ...] OUTDIR"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
out=${!#}
bases=("${@:1:$#-1}")
names=()
for i in "${!bases[@]}"; do
  b=${bases[$i]}
  [ -d "$b" ] || { echo "ab: BASE_DIR '$b' is not a directory (make it with scripts/gpu/ab_base.sh)" >&2; exit 2; }
  [ -n "$(cd "$b" && find . -type f | head -n 1)" ] || { echo "ab: BASE_DIR '$b' holds no files" >&2; exit 2; }
  bases[i]=$(cd "$b" && pwd)
  if [ ${#bases[@]} -eq 1 ]; then
    names+=(old)
  else
    name=$(basename "${bases[$i]}")
    case "$name" in
      new | *[!A-Za-z0-9_.-]*) echo "ab: variant name '$name' (BASE_DIR's folder name) must not be 'new' and may hold only letters, digits, '_', '.', '-'" >&2; exit 2 ;;
    esac
    for seen in "${names[@]}"; do
      [ "$seen" != "$name" ] || { echo "ab: two BASE_DIRs are named '$name': name each variant's folder differently" >&2; exit 2; }
    done
    names+=("$name")
  fi
done
target=${AB_TARGET:-roofline}
build=${AB_BUILD_DIR:-build/cuda}
preset=${AB_PRESET:-cuda}
passes=${AB_PASSES:-3}
case "$passes" in '' | *[!0-9]* | 0) echo "ab: AB_PASSES must be a positive integer" >&2; exit 2 ;; esac
if [ "$target" = roofline ]; then
  default_args="bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
  default_args+=";bench --dummy-weights llama3-8b --batch 64 --context 512 --device cuda --steps 32"
  default_args+=";bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 32"
  default_args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
else
  default_args=""
fi
args_list=${AB_ARGS:-$default_args}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake --preset "$preset" -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" \
    > "$out/ab_configure.log" 2>&1 || { echo "ab: configure failed (ab_configure.log)"; exit 1; }
fi
test_result="not run"
if [ -n "${AB_TEST:-}" ]; then
  cmake --build "$build" -j"$(nproc)" --target "$AB_TEST" > "$out/ab_build_test.log" 2>&1 ||
    { echo "ab: test build failed (ab_build_test.log)"; exit 1; }
  test_bin=$(find "$build" -type f -name "$AB_TEST" -perm -u+x | head -n 1)
  timeout 400 "$test_bin" --gtest_brief=1 > "$out/ab_test.log" 2>&1
  test_result="rc=$?: $(grep -E "PASSED|FAILED" "$out/ab_test.log" | tr '\n' ' ')"
fi
# Every file some BASE_DIR overlays, once. They are built afresh for "new": a build folder from an
# earlier A/B may hold objects of their old versions that are newer than the files.
for b in "${bases[@]}"; do (cd "$b" && find . -type f); done | sort -u > "$work/files"
while read -r f; do [ -e "$f" ] && touch "$f"; done < "$work/files"
cmake --build "$build" -j"$(nproc)" --target "$target" > "$out/ab_build_new.log" 2>&1 ||
  { echo "ab: new build failed (ab_build_new.log)"; exit 1; }
bin=$(find "$build" -type f -name "$target" -perm -u+x | head -n 1)
[ -n "$bin" ] || { echo "ab: no executable named $target under $build" >&2; exit 1; }
mkdir -p "$work/bin"
cp "$bin" "$work/bin/new"

# The tree's own copies of those files, kept aside once; put back after each variant with a fresh
# time stamp (the build folder's objects are then that variant's, and the next build must see the
# files as changed). A file the tree lacks (one the change deleted) is laid in for a variant that
# has it and removed again afterwards.
while read -r f; do
  if [ -e "$f" ]; then
    mkdir -p "$work/saved/$(dirname "$f")"
    cp -p "$f" "$work/saved/$f"
  fi
done < "$work/files"
restore() {
  while read -r f; do
    if [ -e "$work/saved/$f" ]; then cp "$work/saved/$f" "$f"; else rm -f "$f"; fi
  done < "$work/files"
}
for i in "${!bases[@]}"; do
  (cd "${bases[$i]}" && find . -type f) | while read -r f; do
    mkdir -p "$(dirname "$f")"
    cp "${bases[$i]}/$f" "$f"
  done
  cmake --build "$build" -j"$(nproc)" --target "$target" > "$out/ab_build_${names[$i]}.log" 2>&1
  rc=$?
  cp "$bin" "$work/bin/${names[$i]}"
  restore
  [ "$rc" = 0 ] || { echo "ab: ${names[$i]} build failed (ab_build_${names[$i]}.log)"; exit 1; }
  cmp -s "$work/bin/${names[$i]}" "$work/bin/new" && echo "ab: warning: ${names[$i]} and new binaries are identical"
done

: > "$out/ab.txt"
forward="${names[*]} new"
backward=$(echo "$forward" | tr ' ' '\n' | tac | tr '\n' ' ')
order=""
for ((i = 0; i < passes; ++i)); do
  if ((i % 2 == 0)); then order+=" $forward"; else order+=" $backward"; fi
done
IFS=';' read -ra list <<< "$args_list"
[ ${#list[@]} -gt 0 ] || list=("")
for args in "${list[@]}"; do
  for which in $order; do
    echo "== $which: $target $args" >> "$out/ab.txt"
    # shellcheck disable=SC2086 # each list is split into its words on purpose
    timeout 300 "$work/bin/$which" $args >> "$out/ab.txt" 2>&1 || echo "(exit $?)" >> "$out/ab.txt"
  done
done
rm -rf "$work"
grep -vE "^\s*$" "$out/ab.txt" | cut -c1-160
echo
echo "| step | result |"
echo "|---|---|"
echo "| $target, ${names[*]} and new built | rc=0 ($(wc -l < "$out/ab.txt") lines of output in ab.txt) |"
echo "| ${AB_TEST:-no test} on the new tree | $test_result |"
