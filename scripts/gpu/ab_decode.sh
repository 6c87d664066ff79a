#!/usr/bin/env bash
# A/B of the decode step in one device run (scripts/gpu/ab.sh with `roofline bench`): the working
# tree ("new") against the same tree with the files under BASE_DIR laid over it ("old": copies of
# the changed files at the base commit, made by scripts/gpu/ab_base.sh BASE_REV BASE_DIR), both
# built with every core for sm_90a in build/cuda, then `roofline bench` of each shape run
# alternately old / new / new / old on the same GPU, for a change whose effect is smaller than the
# 3-5 % that separates two hosts.
#   scripts/gpu/ab_decode.sh BASE_DIR [BASE_DIR ...] OUTDIR   (several: scripts/gpu/ab.sh's variants)
# Shapes: AB_SHAPES (";"-separated `roofline bench` arguments), default the four decode shapes of
# issue 8; each runs with --context 512 --device cuda --steps 32. Output in OUTDIR/ab.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
shapes=${AB_SHAPES:-"--dummy-weights llama3-8b --batch 1;--dummy-weights llama3-8b --batch 64;--dummy-weights qwen2.5-0.5b --batch 1;--dummy-weights qwen2.5-0.5b --batch 32"}
args=""
IFS=';' read -ra list <<< "$shapes"
for shape in "${list[@]}"; do
  args+="${args:+;}bench $shape --context 512 --device cuda --steps 32"
done
AB_TARGET=roofline AB_ARGS="$args" AB_PASSES=2 exec scripts/gpu/ab.sh "$@"
