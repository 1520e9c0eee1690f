#!/usr/bin/env bash
# bench/gpu/check.sh OUT_DIR [--no-gpu]
#
# One pass over Strata's GPU path on a CUDA machine, inside a hard budget (default 450 s) that
# includes the build: configure and build (Release, sm_90, only the targets needed) or take a
# bundle made elsewhere, the GPU tests, a synthetic Llama-3-8B-shaped Q4_K model in /tmp,
# strata-bench-gpu on it, the transformers peer when torch and transformers import, then the
# real strata-server --backend cuda (bundle only) on a 1B-shaped model (greedy tokens against
# strata-server --backend cpu), on the 8B-shaped one, and on a real GGUF if one is given, each
# driven over gRPC by bench/gpu/server_check.py (greedy, 64 concurrent streams, KV back to
# idle, strata-bench at concurrency 1/16/64). Each step has its own timeout; a step that fails
# or times out is recorded and the next one still runs. The summary table is printed LAST and
# written to OUT_DIR/table.md.
#
# OUT_DIR stays flat and small (at most 8 files come back from the GPU machine):
#   build.log gpu_tests.log make_model.log bench_gpu.log peer.log server.log  one per step kind
#   results.json  every JSON line the benchmarks printed, one object per line, tagged by run
#   table.md      the summary table
#
# Time budget. Each step's timeout is its cap below, cut to what is left minus a reserve kept
# for the steps after it, so a slow build squeezes the tests, not the benchmark; a step left
# with under 10 s is skipped:
#   configure 30 s | build tools 200 s | build gpu tests 90 s | gpu tests 75 s
#   8B Q4_K model 60 s | strata-bench-gpu 120 s | transformers peer 90 s
#   servers: 1B 120 s, 8B 120 s, real model 120 s (each +90 s with features), batch fill 150 s
#   F16 pass (STRATA_CHECK_F16=1) 190 s
#
# STRATA_CHECK_PREBUILT=DIR takes every binary from a bundle made by bench/gpu/bundle.sh (flat
# binaries, lib/, py/) instead of building; its strata-server needs no gRPC package on the
# machine. DIR.tar.xz, the archive bundle.sh writes beside it, is unpacked first (the folder
# itself is over the device call's 64 MiB; the archive is ~15 MB).
# STRATA_CHECK_REAL_MODEL=FILE.gguf adds the server steps on that model (text prompts, greedy
# against --backend cpu with exact fp32 matmuls). STRATA_CHECK_ONLY="tests bench peer
# servers server8b sanitize profile features batchfill" (any subset) runs only those groups; the
# default is the first five (compute-sanitizer, the ncu profile, features and batchfill are
# opt-in: they take minutes). features: the server steps also check structured output (the
# device token bitmask) and speculative decoding (n-gram; a draft model: the 8B-shaped target
# with the 1B-shaped draft), bench/gpu/server_check.py --features. batchfill: bench/batch_fill.py's
# phases on the 8B-shaped model (server_check.py --batch-fill-s 30; 150 s).
#
# --no-gpu (or no nvidia-smi device) skips the device steps with a "no device" line; the build
# and the model generation still run, and the server steps run with --backend cpu so that the
# whole path is rehearsed. Knobs for trying the script elsewhere (defaults are the GPU
# machine's): STRATA_CHECK_BUILD_DIR (build folder, default build-gpu-check), STRATA_CHECK_JOBS
# (16), STRATA_CHECK_MODEL_DIR (/tmp), STRATA_CHECK_MODEL_FLAGS (strata-make-model shape flags,
# default "--preset llama3-8b"), STRATA_CHECK_SMALL_MODEL_FLAGS ("--preset llama3.2-1b"),
# STRATA_CHECK_BUDGET_S (450), STRATA_CHECK_SANITIZE_S (60, per compute-sanitizer tool).
set -u -o pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: $0 OUT_DIR [--no-gpu]" >&2
  exit 2
fi
OUT=$1
NO_GPU=0
[[ "${2:-}" == "--no-gpu" ]] && NO_GPU=1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${STRATA_CHECK_BUILD_DIR:-$ROOT/build-gpu-check}
JOBS=${STRATA_CHECK_JOBS:-16}
MODEL_DIR=${STRATA_CHECK_MODEL_DIR:-/tmp}
read -r -a MODEL_FLAGS <<<"${STRATA_CHECK_MODEL_FLAGS:---preset llama3-8b}"
read -r -a SMALL_MODEL_FLAGS <<<"${STRATA_CHECK_SMALL_MODEL_FLAGS:---preset llama3.2-1b}"
# 450 s of the 480 s budget: the rest is margin for the machine's start and the copy back.
BUDGET=${STRATA_CHECK_BUDGET_S:-450}
START=$SECONDS
RESULTS=$OUT/results.json
TABLE=$OUT/table.md
: >"$RESULTS"
for f in build gpu_tests make_model bench_gpu peer server; do : >"$OUT/$f.log"; done
export PATH="/usr/local/cuda/bin:$PATH"
PY=$(command -v python3 || command -v python || true)

ROWS=()  # "| step | status | seconds | detail |"

left() { echo $((BUDGET - (SECONDS - START))); }

# The smaller of a step's own cap and what is left of the budget minus `reserve` seconds kept
# for the steps after it; 0 when that is under 10 s (the step is then skipped).
cap() {
  local want=$1 reserve=$2 l
  l=$(($(left) - reserve))
  ((l < want)) && want=$l
  ((want < 10)) && want=0
  echo "$want"
}

record() { ROWS+=("| $1 | $2 | $3 | $4 |"); }

# run STEP LOG TIMEOUT_S CMD...: runs CMD under `timeout`, appending stdout+stderr to LOG;
# records ok / FAILED (rc) / TIMEOUT / SKIPPED in the table. Returns the command's status.
run() {
  local step=$1 log=$2 limit=$3
  shift 3
  if ((limit <= 0)); then
    record "$step" "SKIPPED" 0 "no time left in the budget"
    echo "== $step: skipped (no time left)" >>"$log"
    return 124
  fi
  local t0=$SECONDS rc
  echo "== $step (timeout ${limit}s): $*" >>"$log"
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  local dt=$((SECONDS - t0))
  if ((rc == 0)); then
    record "$step" "ok" "$dt" "${DETAIL:-}"
  elif ((rc == 124 || rc == 137)); then
    record "$step" "TIMEOUT" "$dt" "killed after ${limit}s; see $(basename "$log")"
  else
    record "$step" "FAILED (rc $rc)" "$dt" "$(tail -n 1 "$log" | tr '|' '/' | cut -c1-100)"
  fi
  DETAIL=""
  return $rc
}

HAVE_GPU=0
if ((NO_GPU == 0)) && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  HAVE_GPU=1
fi
no_device() { record "$1" "SKIPPED" 0 "no device (no CUDA GPU visible)"; }
ONLY=" ${STRATA_CHECK_ONLY:-tests bench peer servers server8b} "
want() { [[ "$ONLY" == *" $1 "* ]]; }

# ---- 1. configure + build: cap 30 s, then 200 s for the tools, 90 s for the gpu tests ------
# Only the tools the later steps run, then every test binary with a gpu label (the kernel
# tests, and the CUDA backend's when it is in the tree). -k 0: one broken target does not stop
# the others. STRATA_CHECK_PREBUILT=DIR skips all of it and runs the binaries a build made
# elsewhere left in DIR (same layout as a build folder: bench/, src/tools/, tests/).
GPU_TEST_NAMES=(strata_kernels_tests strata_backend_cuda_tests strata_backend_factory_tests)
if [[ -n "${STRATA_CHECK_PREBUILT:-}" ]]; then
  if [[ "$STRATA_CHECK_PREBUILT" == *.tar.xz ]]; then
    # The archive bundle.sh writes beside the folder: what fits the device call's 64 MiB.
    UNPACKED=$(mktemp -d "$MODEL_DIR/strata-bundle-XXXXXX")
    trap 'rm -rf "$UNPACKED"' EXIT
    tar -xJf "$STRATA_CHECK_PREBUILT" -C "$UNPACKED" || {
      echo "cannot unpack $STRATA_CHECK_PREBUILT" >&2
      exit 1
    }
    BUNDLE=$(find "$UNPACKED" -mindepth 1 -maxdepth 1 -type d | head -n 1)
  else
    BUNDLE=$(cd "$STRATA_CHECK_PREBUILT" && pwd)
  fi
  export LD_LIBRARY_PATH="$BUNDLE/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  record build "SKIPPED" 0 "prebuilt bundle $(basename "$BUNDLE")"
  MAKE_MODEL=$BUNDLE/strata-make-model
  BENCH=$BUNDLE/strata-bench-gpu
  TEST_DIR=$BUNDLE
  SERVER_BIN=$BUNDLE
else
  # Warnings stay warnings here: the device's compiler may be newer than the one CI holds us to.
  CONFIGURE=(cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_SERVER=OFF
    -DCMAKE_CUDA_ARCHITECTURES=90 -DSTRATA_WERROR=OFF)
  # GoogleTest is not installed everywhere: a source copy beside the tree is used when present.
  [[ -d "$ROOT/.deps/googletest" ]] && CONFIGURE+=(-DSTRATA_GTEST_SOURCE_DIR="$ROOT/.deps/googletest")
  if ! run configure "$OUT/build.log" "$(cap 30 200)" "${CONFIGURE[@]}"; then
    run configure_without_tests "$OUT/build.log" "$(cap 30 200)" "${CONFIGURE[@]}" \
      -DSTRATA_BUILD_TESTS=OFF
  fi
  run build_tools "$OUT/build.log" "$(cap 200 170)" \
    ninja -C "$BUILD" -j "$JOBS" -k 0 strata-make-model strata-bench-gpu
  run build_gpu_tests "$OUT/build.log" "$(cap 90 160)" \
    ninja -C "$BUILD" -j "$JOBS" -k 0 "${GPU_TEST_NAMES[@]}"
  MAKE_MODEL=$BUILD/src/tools/strata-make-model
  BENCH=$BUILD/bench/strata-bench-gpu
  TEST_DIR=$BUILD/tests
  SERVER_BIN=""  # built without the server: gRPC and Protobuf are not on the GPU machine
fi

# ---- 2. gpu tests: cap 75 s -----------------------------------------------------------------
# bench/gpu/run_gpu_tests.sh: a missing binary, zero tests run, or any test skipped on a device
# is a failure.
if ! want tests; then
  record gpu_tests "SKIPPED" 0 "not in STRATA_CHECK_ONLY"
elif ((HAVE_GPU == 0)); then
  no_device gpu_tests
else
  run gpu_tests "$OUT/gpu_tests.log" "$(cap 75 150)" \
    "$ROOT/bench/gpu/run_gpu_tests.sh" "$TEST_DIR" "${GPU_TEST_NAMES[@]}"
  summary=$(grep '^CHECK:' "$OUT/gpu_tests.log" | sed 's/^CHECK: //' | tr '\n' ';')
  ROWS[-1]=$(awk -F'|' -v d="$summary" '{print "|" $2 "|" $3 "|" $4 "| " d " |"}' <<<"${ROWS[-1]}")
fi

# ---- 2b. compute-sanitizer over the kernel tests (group "sanitize"): 3 tools x cap 60 s -----
if want sanitize; then
  if ((HAVE_GPU == 0)); then
    no_device sanitize
  else
    each=$(cap "${STRATA_CHECK_SANITIZE_S:-60}" 150)
    run sanitize "$OUT/gpu_tests.log" "$((each > 0 ? 3 * each + 20 : 0))" \
      "$ROOT/bench/gpu/sanitize.sh" "$TEST_DIR" "$each"
    summary=$(grep '^SANITIZE:' "$OUT/gpu_tests.log" | sed 's/^SANITIZE: //' | tr '\n' ';')
    ROWS[-1]=$(awk -F'|' -v d="$summary" '{print "|" $2 "|" $3 "|" $4 "| " d " |"}' <<<"${ROWS[-1]}")
  fi
fi

# make_model NAME FTYPE CAP RESERVE [SHAPE FLAGS...]: writes $MODEL_DIR/strata-check-NAME.gguf.
make_model() {
  local name=$1 ftype=$2 limit=$3 reserve=$4 path=$MODEL_DIR/strata-check-$1.gguf
  shift 4
  local shape=("${MODEL_FLAGS[@]}")
  (($# > 0)) && shape=("$@")
  local free_kb
  free_kb=$(df -Pk "$MODEL_DIR" | awk 'NR==2 {print $4}')
  DETAIL="$path; $((free_kb / 1048576)) GiB free before"
  run "make_model_$name" "$OUT/make_model.log" "$(cap "$limit" "$reserve")" \
    "$MAKE_MODEL" "${shape[@]}" --ftype "$ftype" --seed 1 --out "$path"
}

# bench NAME TAG CAP RESERVE FLAGS...: strata-bench-gpu; JSON lines go to results.json.
bench() {
  local name=$1 limit=$2 reserve=$3
  shift 3
  if ((HAVE_GPU == 0)); then
    no_device "bench_gpu_$name"
    return
  fi
  local mark
  mark=$(wc -l <"$OUT/bench_gpu.log")
  run "bench_gpu_$name" "$OUT/bench_gpu.log" "$(cap "$limit" "$reserve")" "$BENCH" "$@"
  tail -n +"$((mark + 1))" "$OUT/bench_gpu.log" | grep '^{' |
    sed "s/^{/{\"run\":\"bench_gpu_$name\",/" >>"$RESULTS"
}

# ---- 3. the 8B Q4_K model: cap 60 s (about 5 GB) ------------------------------------------
Q4=$MODEL_DIR/strata-check-q4_k.gguf
if want bench || want server8b || want profile || want batchfill; then
  make_model q4_k q4_k 60 130
fi

# ---- 4. strata-bench-gpu on it: cap 120 s -------------------------------------------------
want bench && bench q4_k 120 60 --model "$Q4" --copy-mib 2048 --attn-seqs 32,64,128 \
  --decode-batches 1,8,32,128 --decode-context 512 --prefill-tokens 2048 --prefill-batch 4

# ---- 4b. per-kernel time of a decode step under ncu (group "profile"): cap 150 s ----------
if want profile; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)
  if ((HAVE_GPU == 0)); then
    no_device kernel_profile
  elif [[ -z "$NCU" ]]; then
    record kernel_profile "SKIPPED" 0 "no ncu on this machine"
  else
    run kernel_profile "$OUT/bench_gpu.log" "$(cap 150 60)" "$PY" \
      "$ROOT/bench/gpu/kernel_profile.py" --ncu "$NCU" --bench "$BENCH" --model "$Q4" \
      --batches 1,32 --context 512 --timeout 70 --out "$RESULTS"
  fi
fi

# ---- 5. transformers peer: cap 90 s, only when torch and transformers import --------------
if ! want peer; then
  record transformers_peer "SKIPPED" 0 "not in STRATA_CHECK_ONLY"
elif ((HAVE_GPU == 0)); then
  no_device transformers_peer
elif [[ -n "$PY" ]] && timeout 30 "$PY" -c "import torch, transformers" >>"$OUT/peer.log" 2>&1; then
  mark=$(wc -l <"$OUT/peer.log")
  run transformers_peer "$OUT/peer.log" "$(cap 90 0)" \
    "$PY" "$ROOT/bench/gpu/transformers_peer.py" --batches 1,8,32,128 --context 512 \
    --prefill-tokens 2048
  tail -n +"$((mark + 1))" "$OUT/peer.log" | grep '^{' |
    sed 's/^{/{"run":"transformers_peer",/' >>"$RESULTS"
else
  record transformers_peer "SKIPPED" 0 "${PY:-no python}: cannot import torch and transformers"
fi

# ---- 6. strata-server over gRPC: cap 120 s per model ----------------------------------------
# server NAME MODEL CAP RESERVE [server_check.py flags...]
server() {
  local name=$1 model=$2 limit=$3 reserve=$4
  shift 4
  if [[ -z "$SERVER_BIN" || ! -x "$SERVER_BIN/strata-server" ]]; then
    record "server_$name" "SKIPPED" 0 "no strata-server (build mode has no gRPC; use a bundle)"
    return
  fi
  local backend=cuda
  ((HAVE_GPU == 0)) && backend=cpu  # the rehearsal: the same path on the CPU backend
  local mark
  mark=$(wc -l <"$OUT/server.log")
  DETAIL="--backend $backend"
  run "server_$name" "$OUT/server.log" "$(cap "$limit" "$reserve")" \
    "$PY" "$ROOT/bench/gpu/server_check.py" --bin "$SERVER_BIN" --model "$model" \
    --label "$name" --backend "$backend" --out "$OUT/server_results.tmp" "$@"
  [[ -f "$OUT/server_results.tmp" ]] && sed 's/^{/{"run":"server",/' "$OUT/server_results.tmp" \
    >>"$RESULTS" && rm -f "$OUT/server_results.tmp"
  return 0
}
# The CPU reference runs exact fp32 matmuls (the server's default int8 activations round).
# Random-weight models have near-ties that rounding flips, so their comparison is reported but
# only the real model's must match.
REFERENCE=(--reference-flags "--threads 0 --matmul-precision fp32")
# The features group (structured output and speculative decoding, server_check.py --features)
# adds three servers per model: 90 s more per step. The 8B-shaped model's draft model is the
# 1B-shaped one (the same synthetic vocabulary), kept until then.
FEATURES=()
EXTRA_S=0
if want features; then
  FEATURES=(--features)
  EXTRA_S=90
fi
SMALL=$MODEL_DIR/strata-check-small-q4_k.gguf
if { want servers || want features; } &&
  make_model small-q4_k q4_k 30 240 "${SMALL_MODEL_FLAGS[@]}"; then
  if want servers; then
    server small-q4_k "$SMALL" $((120 + EXTRA_S)) 120 "${REFERENCE[@]}" --stream-tokens 32 \
      --random-weights "${FEATURES[@]}"
  fi
fi
if want server8b && [[ -f "$Q4" ]]; then
  DRAFT=()
  want features && [[ -f "$SMALL" ]] && DRAFT=(--draft-model "$SMALL")
  server 8b-q4_k "$Q4" $((120 + EXTRA_S)) \
    "$([[ -n "${STRATA_CHECK_REAL_MODEL:-}" ]] && echo 120 || echo 0)" \
    --reference-backend "" --max-tokens 32 --random-weights "${FEATURES[@]}" "${DRAFT[@]}"
fi
rm -f "$SMALL"
# Issue 21 on the device: a 2,000-line batch job beside 16 interactive streams (30 s phases).
if want batchfill && [[ -f "$Q4" ]]; then
  server 8b-q4_k-batch "$Q4" 150 \
    "$([[ -n "${STRATA_CHECK_REAL_MODEL:-}" ]] && echo 120 || echo 0)" --batch-fill-s 30
fi
if want servers && [[ -n "${STRATA_CHECK_REAL_MODEL:-}" ]]; then
  server real "$STRATA_CHECK_REAL_MODEL" $((120 + EXTRA_S)) 0 "${REFERENCE[@]}" --text-prompts \
    "${FEATURES[@]}"
fi
rm -f "$Q4"

# ---- 7. F16 model + bench, only with STRATA_CHECK_F16=1 and >= 150 s left ---------------------
if ((HAVE_GPU == 0)); then
  no_device "make_model_f16 + bench_gpu_f16"
elif [[ "${STRATA_CHECK_F16:-0}" == 1 ]] && (($(left) >= 150)); then
  F16=$MODEL_DIR/strata-check-f16.gguf
  if make_model f16 f16 70 60; then
    bench f16 "$(cap 120 0)" 0 --model "$F16" --copy-mib 1024 --attn-seqs 128 \
      --decode-batches 1,32 --decode-context 512 --prefill-tokens 2048 --prefill-batch 1
  fi
  rm -f "$F16"
else
  record "make_model_f16 + bench_gpu_f16" "SKIPPED" 0 "STRATA_CHECK_F16 unset or under 150 s left"
fi

# ---- 8. the table, LAST ---------------------------------------------------------------------
{
  echo "## Strata GPU check ($(date -u +%Y-%m-%dT%H:%MZ), $((SECONDS - START)) s of ${BUDGET} s)"
  echo
  if ((HAVE_GPU)); then
    echo "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  else
    echo "device: none (no device)"
  fi
  echo
  echo "| step | status | seconds | detail |"
  echo "|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  # Each program's own table: the '|' lines of its last run in its log.
  section() {
    local title=$1 marker=$2 log=$3 rows
    rows=$(awk -v want="$marker" 'index($0, want) == 1 {keep = 1; n = 0; next}
      /^== / {keep = 0} keep && /^\|/ {rows[n++] = $0} END {for (i = 0; i < n; i++) print rows[i]}' \
      "$log")
    [[ -n "$rows" ]] && printf '\n### %s\n\n%s\n' "$title" "$rows"
    return 0
  }
  section "strata-bench-gpu (8B-shaped, Q4_K)" "== bench_gpu_q4_k " "$OUT/bench_gpu.log"
  section "strata-bench-gpu (8B-shaped, F16)" "== bench_gpu_f16 " "$OUT/bench_gpu.log"
  section "per-kernel time of a decode step (ncu)" "== kernel_profile " "$OUT/bench_gpu.log"
  section "transformers peer (8B-shaped, bf16, eager PyTorch)" "== transformers_peer " \
    "$OUT/peer.log"
  section "strata-server, 1B-shaped Q4_K (greedy against --backend cpu)" "== server_small-q4_k " \
    "$OUT/server.log"
  section "strata-server, 8B-shaped Q4_K" "== server_8b-q4_k " "$OUT/server.log"
  section "strata-server, 8B-shaped Q4_K: a batch job beside 16 streams" \
    "== server_8b-q4_k-batch " "$OUT/server.log"
  section "strata-server, ${STRATA_CHECK_REAL_MODEL:-real model}" "== server_real " \
    "$OUT/server.log"
} >"$TABLE"
cat "$TABLE"
