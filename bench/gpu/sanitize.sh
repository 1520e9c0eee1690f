#!/usr/bin/env bash
# bench/gpu/sanitize.sh TEST_DIR SECONDS_EACH
#
# compute-sanitizer over the CUDA kernel tests: memcheck over every test of
# strata_kernels_tests, then racecheck and synccheck over the kernels that share memory
# between threads (attention, norms, sampling, matmul). Each tool runs under its own timeout;
# a tool that runs out of time reports what it covered. Prints one "SANITIZE: tool: ..." line
# per tool; exit 1 when a tool reported an error (not when it only ran out of time).
set -u -o pipefail
TEST_DIR=$1
EACH=$2
BIN=$TEST_DIR/strata_kernels_tests
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[[ -x "$CS" ]] || { echo "SANITIZE: compute-sanitizer not found"; exit 1; }
[[ -x "$BIN" ]] || { echo "SANITIZE: $BIN missing"; exit 1; }
SHARED='*Attention*:*Norm*:*Sampl*:*Matmul*:*Logit*'
bad=0
for spec in "memcheck|*" "racecheck|$SHARED" "synccheck|$SHARED"; do
  tool=${spec%%|*}
  filter=${spec#*|}
  log=$(mktemp)
  timeout --kill-after=5 "$EACH" "$CS" --tool "$tool" --error-exitcode 97 "$BIN" \
    --gtest_filter="$filter:-*WithoutADevice*" >"$log" 2>&1
  rc=$?
  done_tests=$(grep -cE '^\[       OK \]|^\[  FAILED  \] [A-Za-z]' "$log")
  errors=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+$')
  grep -E '^=========' "$log" | grep -v 'ERROR SUMMARY: 0' | head -n 40
  tail -n 3 "$log"
  case $rc in
    0) state="clean" ;;
    124 | 137) state="timed out after ${EACH}s" ;;
    97) state="ERRORS"; bad=1 ;;
    *) state="rc $rc"; bad=1 ;;
  esac
  echo "SANITIZE: $tool: $state, ${done_tests} tests done, errors ${errors:-none reported}, filter '$filter'"
  rm -f "$log"
done
exit $bad
