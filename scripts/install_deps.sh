#!/usr/bin/env bash
# Installs what jtree needs on Debian 12, as root, by group. Idempotent: packages already
# present are not reinstalled, and apt-get runs only when something is missing.
#   install_deps.sh GROUP...           groups: build python remote mpi safety bench
#   install_deps.sh --check GROUP...   installs nothing (no root needed): names what is missing
#                                      and fails when something is
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
[ $# -gt 0 ] || set -- build

declare -A groups
# The C++ build: compiler, CMake, the libraries jtree uses.
groups[build]="build-essential cmake ninja-build pkg-config libzstd-dev libxxhash-dev
  libflatbuffers-dev flatbuffers-compiler libcurl4-openssl-dev libssl-dev doctest-dev"
# The Python package and its tests (the venv itself comes from scripts/python_env.sh).
groups[python]="python3 python3-venv python3-dev"
# Real servers for the remote tests: nginx for HTTP(S), Ceph RGW (mon, osd, radosgw) for S3,
# openssl for a throwaway CA, bc and curl for the start-up scripts.
groups[remote]="nginx-light openssl radosgw ceph-mon ceph-osd bc curl"
# Multi-process tests: OpenMPI (mpirun, and the headers mpi4py builds against).
groups[mpi]="openmpi-bin libopenmpi-dev"
# Sanitizers and fuzzers (clang's libFuzzer and runtimes).
groups[safety]="clang libclang-rt-14-dev llvm"
# Benchmark peers and plots from Debian.
groups[bench]="python3-matplotlib"

pkgs=()
for g in "$@"; do
  [ -n "${groups[$g]+x}" ] || { echo "install_deps.sh: unknown group $g" >&2; exit 2; }
  # shellcheck disable=SC2206
  pkgs+=(${groups[$g]})
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && [ $check = 1 ]; then
  echo "missing Debian packages: ${missing[*]} (as root: scripts/install_deps.sh $*)" >&2
  exit 1
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
