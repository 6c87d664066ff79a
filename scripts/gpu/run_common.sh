# Sourced by the one-call device scripts (scripts/gpu/*_check.sh): the start every such call shares.
# (require_base and require_base_changed, below, are their check of BASE_DIR.)
# `run_start OUT` makes OUT, starts the clock, records the GPU (OUT/gpu.txt) and configures the CUDA
# build against the staged dependencies (OUT/build.log; warnings do not stop it: the host's
# compiler may warn where ours does not, and a device run is too scarce to lose to that);
# `note TEXT` then appends TEXT and the seconds since the start to OUT/summary.txt and prints it;
# `run_test BINARY [FILTER [LABEL]]` runs a GoogleTest binary under build/cuda (its output into
# OUT/tests.log, at most 300 s) and notes its verdict lines, under LABEL or the binary's name.
# `require_base NAME BASE FILE...`: the A/B scripts' check of BASE_DIR (the files before the change,
# laid over the tree by scripts/gpu/ab.sh): exits 2, saying so as NAME, unless BASE holds every
# FILE. `require_base_changed NAME BASE FILE...` also unless each differs from the tree's.
require_base() {
  local name=$1 base=$2 f
  shift 2
  for f in "$@"; do
    [ -f "$base/$f" ] || {
      echo "$name: $base/$f is missing: make BASE_DIR as the header says" >&2
      exit 2
    }
  done
}
require_base_changed() {
  local name=$1 base=$2 f
  require_base "$@"
  shift 2
  for f in "$@"; do
    cmp -s "$base/$f" "$f" && {
      echo "$name: $base/$f is the tree's: nothing to compare" >&2
      exit 2
    }
  done
}
run_start() {
  run_out=$1
  mkdir -p "$run_out"
  run_started=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader \
    > "$run_out/gpu.txt" 2>&1
  cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" \
    > "$run_out/build.log" 2>&1
}
note() { echo "$* at $(($(date +%s) - run_started)) s" | tee -a "$run_out/summary.txt"; }
run_elapsed() { echo $(($(date +%s) - run_started)); }
run_test() {
  local r
  r=$(timeout 300 "build/cuda/$1" --gtest_brief=1 ${2:+--gtest_filter="$2"} 2>&1 |
      tee -a "$run_out/tests.log" | grep -E "PASSED|FAILED" | tr '\n' ' ')
  note "${3:-$(basename "$1") ${2:-}}: $r"
}
