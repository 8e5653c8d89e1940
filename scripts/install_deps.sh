#!/usr/bin/env bash
# Installs what jtree needs to build and test on Debian 12, as root. Idempotent: packages
# already present are not reinstalled, and apt-get runs only when something is missing.
#   install_deps.sh build   the C++ build (compiler, CMake, the libraries jtree uses)
#   install_deps.sh test    the build plus what the test suite runs (servers, sanitizers)
set -euo pipefail
what=${1:-build}

build_pkgs=(build-essential cmake ninja-build pkg-config
            libzstd-dev libxxhash-dev libflatbuffers-dev flatbuffers-compiler
            libcurl4-openssl-dev libssl-dev doctest-dev)
test_pkgs=(python3 python3-venv python3-dev clang libclang-rt-14-dev llvm)

pkgs=("${build_pkgs[@]}")
if [ "$what" = test ]; then pkgs+=("${test_pkgs[@]}"); fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
