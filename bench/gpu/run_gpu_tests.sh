#!/usr/bin/env bash
# bench/gpu/run_gpu_tests.sh TEST_DIR TEST_BINARY...
#
# Runs each GoogleTest binary TEST_DIR/NAME (a build's tests/, or a bundle) directly (not through ctest, whose files name
# the paths of the machine that built them) and prints one "CHECK: NAME: ..." line per binary.
# Honest by construction: a missing binary, a binary that runs zero tests, a non-zero exit or any
# skipped test (on a machine with a device, a skip means the check did not happen) makes the
# exit status 1. Tests that only mean something without a device (named *WithoutADevice*) are
# filtered out; STRATA_GPU_TEST_FILTER replaces that filter.
set -u -o pipefail
FILTER=${STRATA_GPU_TEST_FILTER:--*WithoutADevice*}
TEST_DIR=$1
shift
bad=0
for t in "$@"; do
  bin=$TEST_DIR/$t
  if [[ ! -x "$bin" ]]; then
    echo "CHECK: $t: binary missing"
    bad=1
    continue
  fi
  echo "== $t"
  log=$(mktemp)
  "$bin" --gtest_brief=1 --gtest_filter="$FILTER" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  ran=$(grep -oE '^\[==========\] [0-9]+ tests? from' "$log" | grep -oE '[0-9]+' | head -n 1)
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$')
  failed=$(grep -oE '^\[  FAILED  \] [0-9]+ tests?,' "$log" | grep -oE '[0-9]+')
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+' "$log" | grep -oE '[0-9]+$')
  rm -f "$log"
  echo "CHECK: $t: rc $rc, ran ${ran:-0}, passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}"
  if ((rc != 0)) || [[ -z "$ran" || "$ran" == 0 || -n "$skipped" ]]; then
    bad=1
  fi
done
exit $bad
