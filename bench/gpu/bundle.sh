#!/usr/bin/env bash
# bench/gpu/bundle.sh BUILD_DIR BUNDLE_DIR
#
# Packs what the GPU check needs from a build made on this machine into BUNDLE_DIR, so that a
# machine with CUDA but without gRPC, Protobuf, Prometheus or GoogleTest packages (and without
# a network) can run it: `STRATA_CHECK_PREBUILT=BUNDLE_DIR bench/gpu/check.sh OUT`.
#   BUNDLE_DIR/            strata-server strata-bench strata-make-model strata-bench-gpu, the
#                          gpu test binaries and libstrata_cuda_backend.so (found beside the
#                          executable), flat
#   BUNDLE_DIR/lib/        every shared library they load that is neither the C/C++ runtime nor
#                          CUDA's (those come from the machine)
#   BUNDLE_DIR/py/         Python stubs of proto/strata/v1 and the pure-Python protobuf they
#                          were generated against (grpcio comes from the machine)
#   BUNDLE_DIR/googletest/ GoogleTest's source, for building the tests there instead
#   BUNDLE_DIR.tar.xz      all of the above in one archive, which check.sh unpacks when given
#                          it as STRATA_CHECK_PREBUILT: carry that, not the folder
# The build must have CUDA and the server (the default on a machine with nvcc and the
# packages). Prints the sizes; the GPU machine takes at most 64 MiB per call in all, the
# working tree included, and the folder alone is over that.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR BUNDLE_DIR" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
OUT=$2
PY=${STRATA_PYTHON:-$ROOT/.venv/bin/python}
rm -rf "$OUT"
mkdir -p "$OUT/lib" "$OUT/py"

BINARIES=(src/tools/strata-server bench/strata-bench src/tools/strata-make-model
  bench/strata-bench-gpu tests/strata_kernels_tests tests/strata_backend_cuda_tests
  tests/strata_backend_factory_tests lib/libstrata_cuda_backend.so)
for b in "${BINARIES[@]}"; do
  [[ -f "$BUILD/$b" ]] || { echo "bundle: $BUILD/$b is missing (build it first)" >&2; exit 1; }
  cp "$BUILD/$b" "$OUT/"
  strip --strip-debug "$OUT/$(basename "$b")"
done

# Shared libraries, except the C/C++ runtime and CUDA's own (the GPU machine has newer ones).
SKIP='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt)'
for b in "${BINARIES[@]}"; do
  ldd "$BUILD/$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $SKIP ]]; then continue; fi
  cp -L "$path" "$OUT/lib/$name"
done

# Python: the stubs, and protobuf's pure-Python wheel of the version that generated them.
"$PY" -m grpc_tools.protoc -I "$ROOT/proto" --python_out="$OUT/py" \
  "$ROOT/proto/strata/v1/generation.proto"
touch "$OUT/py/strata/__init__.py" "$OUT/py/strata/v1/__init__.py"
PB_VERSION=$("$PY" -c "import google.protobuf as p; print(p.__version__)")
WHEELS=$(mktemp -d)
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform any --implementation py -d "$WHEELS" "protobuf==$PB_VERSION"
(cd "$OUT/py" && "$PY" -m zipfile -e "$WHEELS"/protobuf-*.whl .)
rm -rf "$WHEELS" "$OUT"/py/protobuf-*.dist-info

if [[ -d /usr/src/googletest ]]; then
  cp -r /usr/src/googletest "$OUT/googletest"
fi
du -sh "$OUT" | awk '{print "bundle: " $1 " in " $2}'
OUT_ABS=$(cd "$OUT" && pwd)
tar -cJf "$OUT_ABS.tar.xz" -C "$(dirname "$OUT_ABS")" "$(basename "$OUT_ABS")"
ARCHIVE_BYTES=$(stat -c %s "$OUT_ABS.tar.xz")
echo "bundle: $((ARCHIVE_BYTES / 1048576)) MiB in $OUT.tar.xz (carry this one)"
if ((ARCHIVE_BYTES > 48 * 1048576)); then
  echo "bundle: warning: the archive leaves under 16 MiB of the 64 MiB a device call carries" >&2
fi
