#!/usr/bin/env bash
# On an H200: the A/B (one pass a shape, no traces), then the open issues' figures on the tree
# while time is left; on another GPU: the A/B with two passes and the traces.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "GPU: $name"
t0=$(date +%s)
case $name in
  *H200*)
    AB_PASSES=1 AB_ARGS="64 bf16;256 bf16;1 bf16" LIMIT=0 bash bench/results/2026-12-07-edit-ahead/run.sh "$1"
    left=$(( 560 - ($(date +%s) - t0) - 150 ))
    echo "A/B done at $(( $(date +%s) - t0 )) s; issues_check gets $left s"
    [ "$left" -ge 60 ] && scripts/gpu/issues_check.sh "$1" "$left"
    cat /tmp/issues_check.*/summary.txt 2>/dev/null | tail -n 12 ;;
  *) bash bench/results/2026-12-07-edit-ahead/run.sh "$1" ;;
esac
