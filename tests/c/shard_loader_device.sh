#!/usr/bin/env bash
# examples/c/shard_loader's cuda:N mode, against its host mode on the same file and shard.
#   shard_loader_device.sh SHARD_LOADER MODEL load|no-device
# load:      on a machine with a GPU, the shard loaded into GPU 0 must give the host load's
#            digest (every loaded byte) and lines; skipped (exit 77, saying so) without a GPU.
# no-device: without a GPU, cuda:0 must fail with a clear message and nothing printed as
#            loaded; skipped (77) where a GPU is present (the load test covers it there).
# Both exit 77 when the example was built without CUDA (its cuda:N mode then only says so,
# which the no-device test checks too).
set -uo pipefail
[ $# -eq 3 ] || { sed -n 2,9p "$0" >&2; exit 2; }
loader=$1 model=$2 mode=$3
host=$("$loader" "$model" 1 2 row) || { echo "FAIL: the host load failed: $host"; exit 1; }
dev=$("$loader" "$model" 1 2 row cuda:0 2>&1); rc=$?
if [ $rc -ne 0 ]; then
  case "$dev" in
    *"this build has no CUDA support"*|*"no CUDA device 0 (jtree sees 0)"*) ;;
    *) echo "FAIL: cuda:0 failed (exit $rc) without a clear reason: $dev"; exit 1 ;;
  esac
  if [ "$mode" = load ]; then
    echo "SKIPPED: no GPU here ($dev): the load into GPU memory is not tested"
    exit 77
  fi
  [ $rc -eq 1 ] || { echo "FAIL: exit $rc, expected 1: $dev"; exit 1; }
  case "$dev" in *"digest"*|*"bytes loaded"*) echo "FAIL: printed a load: $dev"; exit 1 ;; esac
  echo "ok: cuda:0 without a GPU: $dev"
  exit 0
fi
if [ "$mode" = no-device ]; then
  echo "SKIPPED: a GPU is present (cuda:0 loaded); the load test checks it"
  exit 77
fi
want=$(grep -E '^digest ' <<<"$host") got=$(grep -E '^digest ' <<<"$dev")
[ -n "$want" ] && [ "$want" = "$got" ] || {
  echo "FAIL: host $want, cuda:0 ${got:-no digest}"; echo "$dev"; exit 1; }
# The same shards (the lines naming them) and a line saying how the device load read.
[ "$(grep -F ' of [' <<<"$host")" = "$(grep -F ' of [' <<<"$dev")" ] ||
  { echo "FAIL: other shards on cuda:0"; echo "$dev"; exit 1; }
grep -qE '^into cuda:0: [0-9]+ bytes read with O_DIRECT' <<<"$dev" ||
  { echo "FAIL: no device stats line"; echo "$dev"; exit 1; }
echo "ok: cuda:0 gave the host load's $want"
echo "$dev" | tail -3
