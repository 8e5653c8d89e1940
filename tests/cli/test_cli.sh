#!/usr/bin/env bash
# Tests of the jtree command line against files the demo writes. Usage: test_cli.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: test_cli.sh BUILD_DIR}
jtree=$build/tools/jtree/jtree
demo=$build/examples/jtree_demo
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0

check() {  # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "  ok   $name"; else echo "  FAIL $name"; failures=$((failures + 1)); fi
}
contains() { grep -q -- "$2" <<<"$1"; }
exit_code() { "$@" >/dev/null 2>&1; echo $?; }

"$demo" write "$dir/c.jtree" --layers 1 >/dev/null || { echo "demo write failed"; exit 1; }

out=$("$jtree" ls "$dir/c.jtree")
check "ls lists leaves with dtype and shape" contains "$out" "params/embed  *array  bfloat16  \[32000, 1024\]"
check "ls shows scalar values" contains "$out" "step .*125000"
check "ls shows strings" contains "$out" "'demo-gpt'"
check "ls prints totals and the bytes it read" contains "$out" "read 2 requests"
json=$("$jtree" ls --json "$dir/c.jtree")
check "ls --json is valid JSON" python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d['leaves'][0]['path']=='step'" "$json"

out=$("$jtree" info "$dir/c.jtree")
check "info shows the version and generation" contains "$out" "generation *0"
check "info shows the writer" contains "$out" "writer *jtree 0.1.0"
check "info --json is valid JSON" python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d['generation']==0 and d['chunks']>0" "$("$jtree" info --json "$dir/c.jtree")"

out=$("$jtree" get "$dir/c.jtree" step)
check "get prints a scalar" test "$out" = "125000"
out=$("$jtree" get "$dir/c.jtree" config/model)
check "get prints a string" test "$out" = "demo-gpt"
out=$("$jtree" get "$dir/c.jtree" 'params/embed[2, :3]')
check "get prints a slice" contains "$out" "bfloat16 \[3\]"
"$jtree" get -q -o "$dir/rows.npy" "$dir/c.jtree" 'params/embed[10:20, -4:]'
check "get -o writes .npy with the slice's shape" python3 -c "
import sys
b=open(sys.argv[1],'rb').read()
assert b[:6]==b'\x93NUMPY', b[:6]
hl=int.from_bytes(b[8:10],'little'); h=b[10:10+hl].decode()
assert \"'shape': (10, 4)\" in h, h
assert len(b)==10+hl+10*4*2, len(b)
" "$dir/rows.npy"
"$jtree" get -q -o "$dir/rows.bin" "$dir/c.jtree" 'params/embed[10:20, -4:]'
check "raw output equals the .npy payload" python3 -c "
import sys
a=open(sys.argv[1],'rb').read(); b=open(sys.argv[2],'rb').read()
assert a[-len(b):]==b" "$dir/rows.npy" "$dir/rows.bin"
check "get of a missing key fails with 1" test "$(exit_code "$jtree" get "$dir/c.jtree" params/nope)" = 1
out=$("$jtree" get "$dir/c.jtree" params/nope 2>&1)
check "the error names the file and the key" contains "$out" "c.jtree: key path 'params/nope': no 'nope' in 'params'"
out=$("$jtree" get "$dir/c.jtree" params/embd 2>&1)
check "a typo in a key gets the nearest key paths" contains "$out" "no 'embd' in 'params' (nearest: 'params/embed'"
out=$("$jtree" get "$dir/c.jtree" opt_state/layers/0/mlp/up/mv 2>&1)
check "the nearest key paths are those Python's keys= names" contains "$out" "(nearest: 'opt_state/layers/0/mlp/up/mu', 'opt_state/layers/0/mlp/up/nu', 'opt_state/layers/0/mlp/up')"
out=$("$jtree" get "$dir/c.jtree" ups/qkvv 2>&1)
check "a typo in the last key finds the paths that end like it" contains "$out" "(nearest: 'params/layers/0/attn/qkv')"
python3 -c "
import json, struct, sys
h = json.dumps({'w': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}).encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + bytes(4))" "$dir/model.safetensors"
out=$("$jtree" ls "$dir/model.safetensors" 2>&1)
check "a safetensors file is named, with the command that converts it" contains "$out" "model.safetensors: a safetensors checkpoint, not a jtree file: convert it with \`jtree convert $dir/model.safetensors $dir/model.jtree\`"
check "an out-of-range slice fails" test "$(exit_code "$jtree" get "$dir/c.jtree" 'params/embed[40000]')" = 1
check "a bad slice is a usage error" test "$(exit_code "$jtree" get "$dir/c.jtree" 'params/embed[1:2:3]')" = 2
check "unknown command is a usage error" test "$(exit_code "$jtree" frobnicate x)" = 2

out=$("$jtree" verify "$dir/c.jtree")
check "verify says OK" contains "$out" "^OK: "
# Damage one byte in the middle of the chunk data: verify finds it and names the leaf.
cp "$dir/c.jtree" "$dir/bad.jtree"
size=$(stat -c %s "$dir/bad.jtree")
python3 -c "
import sys
p=sys.argv[1]; f=open(p,'r+b'); f.seek(int(sys.argv[2])//2); b=f.read(1); f.seek(int(sys.argv[2])//2); f.write(bytes([b[0]^0x55]))" "$dir/bad.jtree" "$size"
out=$("$jtree" verify "$dir/bad.jtree")
code=$?
check "verify of a damaged file exits 1" test "$code" = 1
check "verify names the damaged chunk" contains "$out" "leaf params/.* chunk [0-9]*: .*checksum mismatch"
check "verify --json reports the problem" python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert not d['ok'] and d['problems']" "$("$jtree" verify --json "$dir/bad.jtree")"
# A truncated file is refused with a clear message.
head -c $((size - 1000)) "$dir/c.jtree" > "$dir/trunc.jtree"
out=$("$jtree" ls "$dir/trunc.jtree" 2>&1)
check "ls of a truncated file fails clearly" contains "$out" "trunc.jtree: no jtree footer at the end of the file"

out=$("$jtree" compact -o "$dir/compact.jtree" "$dir/c.jtree")
check "compact writes a new file" test -s "$dir/compact.jtree"
check "the compacted file verifies" contains "$("$jtree" verify "$dir/compact.jtree")" "^OK: "
check "compact of a damaged file fails" test "$(exit_code "$jtree" compact -o "$dir/x.jtree" "$dir/bad.jtree")" = 1

# clean: what a killed save left (an unlocked temporary file) goes, the rest stays.
: > "$dir/.c.jtree.tmp-0123456789abcdef"
: > "$dir/.other.jtree.tmp-fedcba9876543210"
: > "$dir/.c.jtree.tmp-not-hex-digits!"
out=$("$jtree" clean "$dir/c.jtree")
check "clean removes a dead save's temporary file" contains "$out" "1 stale temporary file removed"
check "clean keeps the target" test -s "$dir/c.jtree"
check "clean FILE keeps other targets' files" test -e "$dir/.other.jtree.tmp-fedcba9876543210"
out=$("$jtree" clean "$dir")
check "clean DIR removes every target's" contains "$out" "1 stale temporary file removed"
check "clean leaves names that are not temporary files" test -e "$dir/.c.jtree.tmp-not-hex-digits!"
check "clean of a missing directory fails" test "$(exit_code "$jtree" clean "$dir/no/such.jtree")" = 1

# The examples users copy from keep working.
out=$("$build/examples/save_and_load" "$dir/ex.jtree")
check "example save_and_load reads its slice" contains "$out" "w\[10:12, 0:4\] = 1280 1281 1282 1283 / 1408 1409 1410 1411"
out=$("$build/examples/multihost_save" "$dir/sharded.jtree")
check "example multihost_save commits 4 segments" contains "$out" "from 4 segments; w\[700, 0\] = 2"
check "the multi-host file verifies" contains "$("$jtree" verify "$dir/sharded.jtree")" "^OK: "

# commit: a multi-process save whose job died before its commit, finished by hand.
"$build/examples/multihost_save" "$dir/dead.jtree" --no-commit >/dev/null
check "a dead job leaves 4 segments and no file" test "$(ls "$dir" | grep -c '^dead.jtree.seg-0000[0-3]-of-00004$')" = 4 -a ! -e "$dir/dead.jtree"
out=$("$jtree" commit -q --keep-segments "$dir/dead.jtree" 2>&1)
check "commit -q prints nothing" test -z "$out"
check "commit finds the process count beside the file" test -s "$dir/dead.jtree"
check "commit --keep-segments keeps them" test -e "$dir/dead.jtree.seg-00003-of-00004"
check "the committed file equals the one of a normal commit" cmp -s <("$jtree" get "$dir/dead.jtree" 'w[700, :4]') <("$jtree" get "$dir/sharded.jtree" 'w[700, :4]')
json=$("$jtree" commit --json --verify-data -n 4 "$dir/dead.jtree")
check "commit --json reports the segments and sizes" python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d['segments']==4 and d['leaves']==2 and d['raw_bytes']==1024*256*4 and not d['segments_kept'], d" "$json"
check "commit removes the segments afterwards" test "$(ls "$dir" | grep -c '^dead.jtree.seg-')" = 0
check "the hand-committed file verifies" contains "$("$jtree" verify "$dir/dead.jtree")" "^OK: "
out=$("$jtree" commit "$dir/dead.jtree" 2>&1)
check "commit without segments says so" contains "$out" "no segment 0 found beside it; give the process count with -n N"
out=$("$jtree" commit -n 3 "$dir/dead.jtree" 2>&1)
check "commit with a missing segment names it" contains "$out" "dead.jtree.seg-00000-of-00003: segment 0 of 3 is missing"
check "commit -n 0 is a usage error" test "$(exit_code "$jtree" commit -n 0 "$dir/dead.jtree")" = 2

# Remote settings per call (no server needed: a refused port, a usage error, the help).
check "--help lists the remote flags" contains "$("$jtree" ls --help)" "--endpoint URL"
check "compact --help lists them too" contains "$("$jtree" compact --help)" "--part-size BYTES"
out=$("$jtree" ls --concurrency 0 http://127.0.0.1:9/x.jtree 2>&1)
check "--concurrency 0 is a usage error naming the flag" contains "$out" "--concurrency takes a number from 1 to 1024, not '0'"
check "... exit 2" test "$(exit_code "$jtree" ls --concurrency 0 http://127.0.0.1:9/x.jtree)" = 2
out=$("$jtree" info --header 'no colon' http://127.0.0.1:9/x.jtree 2>&1)
check "a header that is not 'Name: value' is refused by the library's rule" contains "$out" "is not \"Name: value\""
check "--addressing takes auto, path or virtual" test "$(exit_code "$jtree" ls --addressing sideways s3://bkt/x.jtree)" = 2
out=$("$jtree" ls --endpoint http://127.0.0.1:9 "$dir/c.jtree" 2>&1)
check "remote flags for a local file are refused, not ignored" contains "$out" "apply to http(s):// and s3:// URLs, and none is given"
check "clean's remote flags need an s3:// URL" test "$(exit_code "$jtree" clean --endpoint http://127.0.0.1:9 "$dir")" = 2
out=$(AWS_ACCESS_KEY_ID= timeout 60 "$jtree" clean --retries 0 --endpoint http://127.0.0.1:9 s3://bkt/x 2>&1)
check "clean --endpoint goes to the endpoint given" contains "$out" "127.0.0.1 port 9"
out=$(timeout 60 "$jtree" ls --retries 0 --connect-timeout 5 http://127.0.0.1:9/x.jtree 2>&1)
check "--retries 0: a refused connection fails at once, naming the URL" contains "$out" "http://127.0.0.1:9/x.jtree"
out=$(AWS_ACCESS_KEY_ID= AWS_ENDPOINT_URL_S3=http://127.0.0.1:1 timeout 60 "$jtree" ls --retries 0 --endpoint http://127.0.0.1:9 s3://bkt/x.jtree 2>&1)
check "--endpoint wins over AWS_ENDPOINT_URL_S3" contains "$out" "127.0.0.1 port 9"

if [ "$failures" -gt 0 ]; then echo "$failures CLI check(s) failed"; exit 1; fi
echo "CLI tests passed"
