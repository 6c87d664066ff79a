#!/usr/bin/env bash
# A/B of the decode step in one device run, for a change whose effect is smaller than the 3-5 %
# that separates two hosts: the working tree ("new") against the same tree with the files under
# BASE_DIR laid over it ("old": copies of the changed files at the base commit, made with
# `git show BASE:path > BASE_DIR/path`), both built with -j16 for sm_90a in build/cuda, then
# `roofline bench` of each shape run alternately old / new / new / old on the same GPU.
#   scripts/gpu/ab_decode.sh BASE_DIR OUTDIR
# Configures build/cuda against .staged when it is not configured yet. Shapes: AB_SHAPES (";"-
# separated `roofline bench` arguments), default the four decode shapes of issue 8. Leaves the
# working tree as it found it (build/cuda then holds the old objects of the overlaid files).
set -uo pipefail
cd "$(dirname "$0")/../.."
base=${1:?usage: scripts/gpu/ab_decode.sh BASE_DIR OUTDIR}
out=${2:?usage: scripts/gpu/ab_decode.sh BASE_DIR OUTDIR}
mkdir -p "$out"
shapes=${AB_SHAPES:-"--dummy-weights llama3-8b --batch 1;--dummy-weights llama3-8b --batch 64;--dummy-weights qwen2.5-0.5b --batch 1;--dummy-weights qwen2.5-0.5b --batch 32"}
work=$(mktemp -d)
[ -f build/cuda/CMakeCache.txt ] ||
  cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/ab_configure.log" 2>&1
cmake --build build/cuda -j16 --target roofline > "$out/ab_build_new.log" 2>&1 || { echo "ab: new build failed"; exit 1; }
cp build/cuda/tools/cli/roofline "$work/roofline_new"
# Lay the base files over the tree (keeping the new ones aside), build, put the new ones back.
(cd "$base" && find . -type f) > "$work/files"
# A base file the tree lacks (one the change deleted) is laid in and removed again afterwards.
while read -r f; do
  if [ -e "$f" ]; then
    mkdir -p "$work/saved/$(dirname "$f")"
    cp -p "$f" "$work/saved/$f"
  fi
  mkdir -p "$(dirname "$f")"
  cp "$base/$f" "$f"
done < "$work/files"
cmake --build build/cuda -j16 --target roofline > "$out/ab_build_old.log" 2>&1
old_rc=$?
cp build/cuda/tools/cli/roofline "$work/roofline_old" 2>/dev/null
while read -r f; do
  if [ -e "$work/saved/$f" ]; then cp -p "$work/saved/$f" "$f"; else rm -f "$f"; fi
done < "$work/files"
[ "$old_rc" = 0 ] || { echo "ab: old build failed"; exit 1; }

: > "$out/ab_bench.txt"
IFS=';' read -ra list <<< "$shapes"
for args in "${list[@]}"; do
  for which in old new new old; do
    echo "== $which: roofline bench $args --context 512 --device cuda --steps 32" >> "$out/ab_bench.txt"
    timeout 120 "$work/roofline_$which" bench $args --context 512 --device cuda --steps 32 \
      >> "$out/ab_bench.txt" 2>&1 || echo "(exit $?)" >> "$out/ab_bench.txt"
  done
done
grep -E "^==|decode step|graph floor" "$out/ab_bench.txt"
