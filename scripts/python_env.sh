#!/usr/bin/env bash
# Creates (or updates) the project's virtual environment in .venv and installs Python packages
# from PyPI into it. Base packages always; more by group:
#   python_env.sh [GROUP...]   groups: test (jax, torch, pytest...), remote (boto3; torch
#                              for the remote loads to a device through the stand-in),
#                              multihost (mpi4py, torch, boto3),
#                              safety (atheris), bench (the benchmark peers)
#                              (scripts/build_wheel.sh makes venvs of its own, outside the tree)
# Prints nothing but pip's errors; safe to run again (pip skips what is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh python

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)

# Building and importing the package.
base=(numpy ml_dtypes nanobind scikit-build-core)
declare -A groups
# torch==2.13.0 is pinned: this version's CPU build is what these machines provide.
# safetensors, fastsafetensors and psutil: tests/python/test_bench_gpu_script.py runs
# bench/python/gpu_load.py, which compares with safetensors and fastsafetensors (0.5.0 or later:
# its tensors outlive the loader's buffer; psutil: memory sampling where clear_refs is refused).
# gguf, orbax-checkpoint (+ tensorstore), flax (+ msgpack) and flatbuffers (JAX's
# pytree_serialization imports it): the peers whose files `jtree convert` reads and writes
# (tests/python/test_convert_gguf.py, test_convert_orbax_flax.py).
groups[test]="pytest jax jaxlib torch==2.13.0 safetensors fastsafetensors>=0.5.0 psutil gguf orbax-checkpoint tensorstore flax msgpack flatbuffers"
groups[remote]="boto3 pytest torch==2.13.0"
# The multi-process tests: mpi4py (builds against Debian's OpenMPI when no wheel fits), torch for
# torch.distributed, boto3 for the S3 variant.
groups[multihost]="mpi4py torch==2.13.0 boto3 pytest"
groups[safety]="atheris pytest gguf safetensors"  # gguf, safetensors: fuzz/python/fuzz_convert_*.py
# flatbuffers: JAX's pytree_serialization (a peer) imports it. matplotlib: bench/python/report.py's
# plots (from PyPI, because the venv does not see Debian's python3-matplotlib).
# fastsafetensors: a peer of bench/python/gpu_load.py (loads into GPU memory; 0.5.0 or later,
# whose tensors outlive the loader's buffer).
groups[bench]="safetensors orbax-checkpoint tensorstore flax h5py zarr zstandard psutil flatbuffers matplotlib fastsafetensors>=0.5.0"

pkgs=("${base[@]}")
for g in "$@"; do
  [ -n "${groups[$g]+x}" ] || { echo "python_env.sh: unknown group $g" >&2; exit 2; }
  # shellcheck disable=SC2206
  pkgs+=(${groups[$g]})
done
# (This machine's pip configuration names an extra local index that may be absent: pip's
# warnings about it are noise.)
"${pip[@]}" "${pkgs[@]}" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
