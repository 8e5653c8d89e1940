#!/usr/bin/env bash
# Tests of `jtree CMD --help`, `--json` on every command that prints, and `jtree diff`, on files
# make_diff_files writes. Usage: test_cli_commands.sh JTREE_BINARY MAKE_DIFF_FILES_BINARY
# (ctest runs it: tests/cli/CMakeLists.txt).
set -uo pipefail
jtree=${1:?usage: test_cli_commands.sh JTREE MAKE_DIFF_FILES}
make_files=${2:?usage: test_cli_commands.sh JTREE MAKE_DIFF_FILES}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0

check() {  # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "  ok   $name"; else echo "  FAIL $name"; failures=$((failures + 1)); fi
}
contains() { grep -q -- "$2" <<<"$1"; }
exit_code() { "$@" >/dev/null 2>&1; echo $?; }
# py JSON CODE: runs CODE with d = the parsed JSON (fails on invalid JSON or a false assert).
py() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); $2" "$1"; }

"$make_files" "$dir" || { echo "make_diff_files failed"; exit 1; }
cp "$dir/a.jtree" "$dir/a_copy.jtree"

echo "== --help"
for cmd in ls info get verify compact clean commit diff; do
  for flag in --help -h; do
    out=$("$jtree" "$cmd" "$flag" 2>&1)
    code=$?
    check "$cmd $flag exits 0" test "$code" = 0
    check "$cmd $flag shows the command's usage" contains "$out" "^usage: jtree $cmd "
  done
done
check "diff --help says what the exit status means" contains "$("$jtree" diff --help)" "0 the files are equal, 1 they differ, 2 trouble"
check "--help wins over missing arguments" test "$(exit_code "$jtree" get --help)" = 0
out=$("$jtree" --help)
check "the general usage lists diff" contains "$out" "  diff A B "
check "the general usage points at CMD --help" contains "$out" "'jtree CMD --help'"

echo "== --json"
json=$("$jtree" ls --json "$dir/a.jtree")
check "ls --json: shapes are arrays of numbers" py "$json" "
leaves={l['path']: l for l in d['leaves']}
assert leaves['params/emb']['shape']==[1024, 256], leaves['params/emb']
assert leaves['params/emb']['dtype']=='float32' and leaves['params/emb']['chunks']==16"
check "info --json parses" py "$("$jtree" info --json "$dir/a.jtree")" "assert d['leaves']==7 and d['nodes']==10 and d['generation']==0, d"
check "get --json of an int" py "$("$jtree" get --json "$dir/a.jtree" step)" "assert d['value']==5 and d['kind']=='int' and d['key']=='step', d"
check "get --json of a string" py "$("$jtree" get --json "$dir/a.jtree" name)" "assert d['value']=='run-1', d"
check "get --json of None" py "$("$jtree" get --json "$dir/a.jtree" opt)" "assert d['value'] is None and d['kind']=='None', d"
check "get --json of a slice: shape and nested data" py "$("$jtree" get --json "$dir/a.jtree" 'params/w[1:3, :4]')" "
assert d['dtype']=='float32' and d['shape']==[2, 4], d
assert d['data']==[[(256+j)%97*0.25 for j in range(4)], [(512+j)%97*0.25 for j in range(4)]], d['data']"
check "get --json of a large array: first and last elements" py "$("$jtree" get --json "$dir/a.jtree" params/emb)" "
assert d['shape']==[1024, 256] and d['elements']==262144 and len(d['first'])==8 and len(d['last'])==8, d
assert all(isinstance(v, float) and 0 <= v < 4096 for v in d['first'] + d['last']), d"
check "get --json -o reports the file written" py "$("$jtree" get --json -o "$dir/w.npy" "$dir/a.jtree" params/w)" "
assert d['output'].endswith('w.npy') and d['bytes']==64*256*4 and d['shape']==[64, 256], d"
check "get --json -o writes the file" test -s "$dir/w.npy"
cp "$dir/a.jtree" "$dir/c.jtree"
check "compact --json parses" py "$("$jtree" compact --json -o "$dir/c2.jtree" "$dir/c.jtree")" "
assert d['file'].endswith('c.jtree') and d['output'].endswith('c2.jtree') and d['size_after']>0 and d['chunks']>=2, d"
: > "$dir/.c.jtree.tmp-0123456789abcdef"
check "clean --json parses" py "$("$jtree" clean --json "$dir/c.jtree")" "assert len(d['paths'])==1 and d['paths'][0]['removed']==1 and d['paths'][0]['path'].endswith('c.jtree'), d"
check "--allow-full-download is accepted (a local file: no effect)" test "$(exit_code "$jtree" ls --allow-full-download "$dir/a.jtree")" = 0

echo "== diff"
check "identical files: exit 0" test "$(exit_code "$jtree" diff "$dir/a.jtree" "$dir/a_copy.jtree")" = 0
json=$("$jtree" diff --json "$dir/a.jtree" "$dir/a_copy.jtree")
size=$(stat -c %s "$dir/a.jtree")
check "identical files: equal by checksums, no leaf data read" py "$json" "
assert d['equal'] and not d['added'] and not d['removed'] and not d['changed'], d
assert d['compared']['checksums']>=2 and d['compared']['data']==0, d['compared']
assert d['data_bytes_read']==0, d
assert d['io']['a']['bytes_read'] < $size // 4 and d['io']['b']['bytes_read'] < $size // 4, d['io']"
out=$("$jtree" diff "$dir/a.jtree" "$dir/a_copy.jtree")
check "identical files: the text says how" contains "$out" "equal: 8 entries (4 by checksums without reading data, 4 from the headers, 0 by reading)"
check "identical files: 0 B of leaf data read" contains "$out" "read 0 B of leaf data"
json=$("$jtree" diff --json "$dir/a.jtree" "$dir/a_again.jtree")
check "the same tree saved twice: equal, by reading (other checksum seeds)" py "$json" "
assert d['equal'] and d['compared']['data']>=2 and d['data_bytes_read']>0, d"

check "a changed value: exit 1" test "$(exit_code "$jtree" diff "$dir/a.jtree" "$dir/value.jtree")" = 1
json=$("$jtree" diff --json "$dir/a.jtree" "$dir/value.jtree")
check "a changed value: max abs diff and count" py "$json" "
c={x['path']: x for x in d['changed']}
assert set(c)=={'params/emb', 'params/q', 'step', 'name'}, sorted(c)
assert c['params/emb']['change']=='value' and c['params/emb']['max_abs_diff']==0.5, c['params/emb']
assert c['params/emb']['differing_elements']==1 and c['params/emb']['elements']==262144
assert c['params/q']['max_abs_diff']==3, c['params/q']
assert c['step']['max_abs_diff']==1 and c['step']['a']['value']=='5' and c['step']['b']['value']=='6', c['step']
assert c['name']['max_abs_diff']=='differs', c['name']
assert not d['equal'] and not d['added'] and not d['removed']"
out=$("$jtree" diff "$dir/a.jtree" "$dir/value.jtree")
check "a changed value: the text shows it" contains "$out" "~ params/emb *value: max abs diff 0.5 (1 of 262144 elements differ)"
check "a changed string: the text shows both" contains "$out" "~ name *value: 'run-1' -> 'run-2'"

check "added and removed keys: exit 1" test "$(exit_code "$jtree" diff "$dir/a.jtree" "$dir/keys.jtree")" = 1
out=$("$jtree" diff "$dir/a.jtree" "$dir/keys.jtree")
check "a removed key" contains "$out" "^- params/b  *float32 \[16\]"
check "an added key" contains "$out" "^+ params/extra  *float32 \[16\]"
check "added/removed in JSON" py "$("$jtree" diff --json "$dir/a.jtree" "$dir/keys.jtree")" "
assert [x['path'] for x in d['removed']]==['params/b'] and [x['path'] for x in d['added']]==['params/extra'], d
assert d['added'][0]['b']['shape']==[16] and not d['changed'], d"

out=$("$jtree" diff "$dir/a.jtree" "$dir/spec.jtree")
check "a dtype change" contains "$out" "~ params/w *dtype: float32 \[64, 256\] -> float64 \[64, 256\]"
check "a shape change" contains "$out" "~ params/q *shape: int8 \[4096\] -> int8 \[4095\]"
check "a string of another length is a changed value" contains "$out" "~ name *value: 'run-1' -> 'run-10'"
check "dtype/shape changes in JSON" py "$("$jtree" diff --json "$dir/a.jtree" "$dir/spec.jtree")" "
c={x['path']: x for x in d['changed']}
assert c['params/w']['change']=='dtype' and c['params/w']['b']['dtype']=='float64', c
assert c['params/q']['change']=='shape' and c['params/q']['a']['shape']==[4096] and c['params/q']['b']['shape']==[4095], c"
check "other metadata only: exit 1" test "$(exit_code "$jtree" diff "$dir/a.jtree" "$dir/meta.jtree")" = 1
out=$("$jtree" diff "$dir/a.jtree" "$dir/meta.jtree")
check "a changed metadata value" contains "$out" "^M~ run = '1' -> '2'"
check "a removed metadata key" contains "$out" "^M- note = 'base'"
check "an added metadata key" contains "$out" "^M+ extra = 'yes'"
check "equal trees, other metadata: the summary says so" contains "$out" "^equal trees, other metadata: 8 entries"
check "metadata in JSON" py "$("$jtree" diff --json "$dir/a.jtree" "$dir/meta.jtree")" "
m=d['metadata']
assert not d['equal'] and not d['changed'] and not d['added'] and not d['removed'], d
assert m['changed']==[{'key': 'run', 'a': '1', 'b': '2'}], m
assert m['removed']==[{'key': 'note', 'a': 'base'}] and m['added']==[{'key': 'extra', 'b': 'yes'}], m"
check "--ignore-metadata: equal trees are equal, exit 0" test "$(exit_code "$jtree" diff --ignore-metadata "$dir/a.jtree" "$dir/meta.jtree")" = 0
check "--ignore-metadata: nothing about metadata in JSON" py "$("$jtree" diff --json --ignore-metadata "$dir/a.jtree" "$dir/meta.jtree")" "
assert d['equal'] and d['metadata']=={'added': [], 'removed': [], 'changed': []}, d"
check "identical files: no metadata change" py "$("$jtree" diff --json "$dir/a.jtree" "$dir/a_copy.jtree")" "
assert d['metadata']=={'added': [], 'removed': [], 'changed': []}, d"
check "diff -q prints nothing" test -z "$("$jtree" diff -q "$dir/a.jtree" "$dir/value.jtree")"
check "diff of a missing file: exit 2" test "$(exit_code "$jtree" diff "$dir/a.jtree" "$dir/none.jtree")" = 2
out=$("$jtree" diff "$dir/a.jtree" "$dir/none.jtree" 2>&1)
check "diff of a missing file names it" contains "$out" "none.jtree"
check "diff with one file: usage error, exit 2" test "$(exit_code "$jtree" diff "$dir/a.jtree")" = 2

if [ "$failures" -gt 0 ]; then echo "$failures CLI check(s) failed"; exit 1; fi
echo "CLI command tests passed"
