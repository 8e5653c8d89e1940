#!/usr/bin/env bash
# Runs jtree's GPU tests and benchmarks on a GPU machine, from a checkout of the commit a
# bundle was built from (scripts/gpu_bundle.sh), with that machine's python3 (torch with CUDA;
# JAX with CUDA for the JAX rows; safetensors; fastsafetensors from its wheel for its row):
#   bench/gpu_checks.sh BUNDLE_DIR OUT_DIR [SECONDS]
# Stages, most important first, each bounded by `timeout` and never stopping the next:
#   1. the C++ GPU tests (test_device_cuda fails rather than skips: JTREE_TEST_REQUIRE_ALL=1;
#      test_device_hash, the XXH3 kernel, when the bundle has it), the C example's load into GPU
#      memory (tests/c/shard_loader_device.sh), and the XXH3 kernel's hash rate against
#      libxxhash's (bench_device_hash, 1 GiB of 4 MiB chunks, ~10 s)
#   2. the Python GPU tests (test_device_load.py, test_device_plain.py: torch and JAX), and what a JAX load's
#      allocation costs, jtree's own (cudaMalloc) and JAX's (compiled once per size)
#   3. bench_device with the defaults (page cache: zero copy and staged loads; pinning costs),
#      bench_populate (staging memory faulted in with huge pages or small ones), and the
#      memory a load leaves kept (retained_memory.py)
#   4. gpu_breakdown.py (where the time of jtree's load goes), shard_load.py (a tensor-parallel
#      rank's shard; the whole model from a cold disk with the disk's rate), then gpu_load.py,
#      workload llm, warm and cold page cache, every system, --time-budget
#   5. bench_device, cold loads with and without O_DIRECT
# Everything it prints also goes to OUT_DIR/log.txt; the tables to OUT_DIR/*.md, *.txt.
# SECONDS (default 400) is the time for the whole: gpu_load.py gets what stages 1-4 leave minus
# 90 s for stage 5. It stops at once (exit 3) when jtree sees no CUDA device. Extra Python wheels (fastsafetensors...) in BUNDLE_DIR/wheels/ are
# installed with the jtree wheel.
set -u
[ $# -ge 2 ] || { sed -n 2,15p "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$PWD
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
total=${3:-400}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false JTREE_TEST_REQUIRE_ALL=1
exec > >(tee -a "$out/log.txt") 2>&1
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
stage() { echo; echo "=== [$(elapsed)s] $*"; }
# run SECONDS CMD...: one bounded step; its exit status is printed, never fatal.
run() { local s=$1; shift; timeout -k 5 "$s" "$@"; echo "--- rc=$? ($*)"; }

stage machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nproc; python3 --version
# GPUDirect Storage (cuFile, optional in issue 22): its kernel module and library, if any
# (torch's CUDA wheels bring libcufile; without nvidia-fs it runs in compatibility mode only).
echo "nvidia-fs: $(cat /proc/driver/nvidia-fs/version 2>/dev/null || echo absent)"
python3 -c "import glob, site; print('libcufile:', glob.glob(site.getsitepackages()[0] + '/nvidia/*/lib/libcufile.so*') or glob.glob('/usr/local/cuda*/lib64/libcufile.so*') or 'absent')" || true

stage install
site=$(mktemp -d /tmp/jtree-gpu-site.XXXXXX)
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
  "$bundle"/jtree_arrays-*.whl $(ls "$bundle"/wheels/*.whl 2>/dev/null) || exit 1
export PYTHONPATH=$site
echo "bundle: $(tr '\n' ';' < "$bundle/BUILD_INFO" 2>/dev/null || echo 'no BUILD_INFO')"
devices=$(python3 -c "import jtree._device as d; print(d.cuda_device_count() if d.cuda_built() else 0)" || echo 0)
echo "jtree sees $devices CUDA device(s)"
if [ "$devices" = 0 ]; then
  # (Without a device every stage below would time host fallbacks: minutes of a short device
  # budget measuring nothing. A driver older than the bundle's toolkit is the usual cause:
  # nvidia-smi's "CUDA Version" is the newest runtime its driver serves.)
  echo "!!! jtree sees no CUDA device: stopping. Driver: $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' || echo 'nvidia-smi failed')"
  exit 3
fi

stage "C++ GPU tests"
export LD_LIBRARY_PATH=$bundle/lib
work=$(mktemp -d /var/tmp/jtree-gpu-work.XXXXXX)  # (a disk file system: O_DIRECT cases)
for t in test_device_cuda test_device_hash test_device_zero_copy test_device_direct \
         test_device_staging; do
  [ -x "$bundle/bin/$t" ] || { echo "!!! $t is not in the bundle: NOT run"; continue; }
  (cd "$work" && run 45 "$bundle/bin/$t" > "$out/$t.txt" 2>&1; tail -4 "$out/$t.txt")
done

stage "C example: examples/c/shard_loader into GPU memory against its host load"
env -u LD_LIBRARY_PATH python3 -c "import numpy as np, jtree; r = np.random.default_rng(0); \
jtree.save({**{'w%d' % i: r.standard_normal((1024, 4096), dtype=np.float32) for i in range(4)}, \
'b': np.arange(1024, dtype=np.float32)}, '$work/shards.jtree', compression=None)" &&
  run 60 tests/c/shard_loader_device.sh "$bundle/bin/shard_loader" "$work/shards.jtree" load |
  tee "$out/shard_loader.txt"

stage "bench_device_hash: the GPU XXH3 kernel's hash rate against libxxhash's (issue 50)"
# (Chunks already in device memory; the CPU rows on one thread and on every core. Its exit
# status is 1 when the kernel's hashes differ from libxxhash's.)
if [ -x "$bundle/bin/bench_device_hash" ]; then
  run 60 "$bundle/bin/bench_device_hash" --mib 1024 --chunk-mib 4 --runs 5 |
    tee "$out/bench_device_hash.txt"
else
  echo "!!! bench_device_hash is not in the bundle (built without nvcc?): NOT run"
fi

stage "Python GPU tests"
(cd tests/python && run 90 env -u LD_LIBRARY_PATH python3 -m pytest -q -p no:cacheprovider -rs \
   test_device_load.py test_device_plain.py -k "gpu or cuda" 2>&1 | tail -15)

stage "JAX: a load's allocation, jtree's own (cudaMalloc) against JAX's (compiled per size)"
(cd bench/python && run 60 env -u LD_LIBRARY_PATH python3 jax_allocation_probe.py 2>&1 |
   grep -v '^WARNING')

stage "bench_device: defaults, page cache (tmpfs)"
run 90 "$bundle/bin/bench_device" --gib 1 --runs 3 --dir /dev/shm | tee "$out/bench_device.txt"
# The host's part of pinning, huge pages against small (since the fourth run; ~1 s).
[ -x "$bundle/bin/bench_populate" ] && run 20 "$bundle/bin/bench_populate" | tee "$out/bench_populate.txt"
# Memory a process keeps after a load, its workers' scratch buffers (bounded since 2026-11-29;
# one worker per core there: ~10 s).
run 40 env -u LD_LIBRARY_PATH python3 bench/python/retained_memory.py --threads 0,64 --runs 3 \
  | tee "$out/retained_memory.txt"
# (Staging small enough for the CPU's cache, 16 MiB/8 and 32 MiB/16, was measured on
# 2026-11-27: 8.9 and 8.3 GB/s against the default's 29.8, bench/gpu.md. Not run again.)
unset LD_LIBRARY_PATH

stage "gpu_breakdown.py: where a load's time goes (llm, warm, fresh processes)"
run 190 python3 bench/python/gpu_breakdown.py --device cuda --runs 3 \
  --modes dev,dev-per-tensor,dev-pin-early,dev-reserve-pin,dev-small-pages,dev-serial,dev-again,fastsafetensors \
  --out "$out/breakdown.json" \
  | tee "$out/breakdown.txt"
# Many small tensors (issue 46, part 3): the load's tensors grouped in one allocation (the
# default since 2026-12-05) against one allocation each, beside fastsafetensors.
run 90 python3 bench/python/gpu_breakdown.py --device cuda --runs 3 --workload small \
  --modes dev,dev-per-tensor,fastsafetensors --out "$out/breakdown_small.json" \
  | tee "$out/breakdown_small.txt"

stage "shard_load.py: a tensor-parallel rank's shard (rank 3 of 8), tmpfs and disk, warm"
# (issue 46: jtree.load(slices=TensorParallel) in one device pass against safetensors'
# get_slice and torch.load(mmap=True); 16 layers of hidden 2048, about 1.7 GiB of bf16.)
run 150 python3 bench/python/shard_load.py --device cuda --layers 16 --runs 3 \
  --dirs /dev/shm "$work" | tee "$out/shard_load.md"
stage "shard_load.py: the whole model from a cold disk, raw and default file, and the disk's rate"
# (issue 46 item 4: cold reads with O_DIRECT, lib/src/read/cold_reads.h; the same files as the
# stage above, in $work, evicted before each load; the disk's own rate in the same run.)
run 90 python3 bench/python/shard_load.py --device cuda --layers 16 --runs 3 --dirs "$work" \
  --cold --whole --systems jtree-raw jtree-zstd safetensors | tee "$out/shard_load_cold.md"

# (Stage 5 takes up to 2 x 40 s; gpu_load.py stops starting systems at its --time-budget and
# is killed at `left`, so that the whole stays within SECONDS.)
left=$(( total - $(elapsed) - 90 ))
stage "gpu_load.py: llm, warm and cold ($left s)"
if [ "$left" -gt 60 ]; then
  run "$left" python3 bench/python/gpu_load.py --device cuda --scale 1 --runs 3 \
    --workloads llm --cache-state warm,cold --cold-workdir "$work/cold" \
    --cache /var/tmp/jtree-bench-cache --drop-caches never --time-budget $(( left - 30 )) \
    --systems jtree-raw-torch-dev,fastsafetensors,jtree-raw-torch-dev-reads,jtree-raw-torch-out,jtree-raw-jax,safetensors,torch,jtree-torch-out,jtree-raw-torch \
    --out "$out/gpu-load.json" --md "$out/gpu-load.md"
else
  echo "no time left for gpu_load.py"
fi

stage "bench_device: cold loads, O_DIRECT (auto) against buffered"
# (The staging sizes and zero copy were measured on 2026-11-26, bench/gpu.md: the default
# ring is the fastest and zero copy slower; the cold rows still move with the disk and the
# number of reads in flight.)
export LD_LIBRARY_PATH=$bundle/lib
for d in auto off; do
  run 40 "$bundle/bin/bench_device" --gib 1 --runs 2 --dir "$work" --only raw --cold 1 \
    --zero-copy off --direct $d | tee -a "$out/bench_device_cold.txt"
done
rm -rf "$work" "$site"
stage "done in $(elapsed) s"
