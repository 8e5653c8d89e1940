#!/usr/bin/env bash
# A throwaway S3 server for the remote tests: Ceph's RADOS Gateway on a single-node cluster
# (one monitor, one OSD keeping objects in memory, no cephx) under DIR, listening on
# 127.0.0.1 only. RGW verifies AWS Signature V4 for real.
#
#   s3_server.sh start DIR RGW_PORT MON_PORT   creates a user with AWS_ACCESS_KEY_ID /
#                                              AWS_SECRET_ACCESS_KEY (default testkey /
#                                              testsecret); ready when it returns
#   s3_server.sh stop DIR                      stops the daemons (by PID) and removes DIR
#
# The OSD keeps objects in memory, JTREE_TEST_S3_MEMSTORE_BYTES at most (default 3 GiB).
#
# Needs Debian's radosgw, ceph-mon, ceph-osd (scripts/install_deps.sh remote).
set -euo pipefail

cmd=${1:?usage: s3_server.sh start DIR RGW_PORT MON_PORT | stop DIR}
dir=${2:?DIR}

stop() {
  local pids alive p
  pids=$(cat "$dir"/run/*.pid 2>/dev/null || true)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
    for _ in $(seq 1 100); do
      alive=""
      for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
      [ -z "$alive" ] && break
      sleep 0.1
    done
    # shellcheck disable=SC2086
    [ -n "$alive" ] && kill -9 $alive 2>/dev/null || true
  fi
  rm -rf "$dir"
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "s3_server.sh: unknown command $cmd" >&2; exit 2; }
port=${3:?RGW_PORT}
mon_port=${4:?MON_PORT}
if ls "$dir"/run/*.pid >/dev/null 2>&1; then
  echo "s3_server.sh: already running under $dir" >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$dir"/{run,log,mon,osd,rgw}
fsid=$(cat /proc/sys/kernel/random/uuid)
export CEPH_CONF=$dir/ceph.conf
# Every path under $dir (admin sockets, pid files, logs, data): nothing of the machine's own
# Ceph configuration is touched. "rgw dns name" lets virtual-hosted requests
# (http://bucket.localhost:PORT/key) work.
cat > "$CEPH_CONF" <<CONF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mon_port
public addr = 127.0.0.1
ms bind msgr2 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
run dir = $dir/run
admin socket = $dir/run/\$cluster-\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
keyring = $dir/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
[mon]
mon data = $dir/mon/\$cluster-\$id
mon cluster log file = $dir/log/cluster.log
paxos propose interval = 0.01
paxos min wait = 0.001
[osd]
osd data = $dir/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = ${JTREE_TEST_S3_MEMSTORE_BYTES:-3221225472}
osd max object name len = 460
osd max object namespace len = 64
osd crush update on start = false
osd class update on start = false
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $dir/rgw
rgw dns name = localhost
rgw thread pool size = 64
CONF

trap 'echo "s3_server.sh: start failed; logs in $dir/log" >&2' ERR
ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$dir/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
  --cap mgr 'allow *' >/dev/null
# --addv with an explicit v1 address: a port other than 6789 would otherwise be taken as
# msgr2, which this configuration does not bind.
monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
ceph-mon --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" 2>>"$dir/log/mkfs.log"
ceph-mon -i a
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
osd_id=$(timeout 60 ceph osd new "$osd_uuid")
timeout 60 ceph osd crush add "osd.$osd_id" 1.0 root=default host=localhost >/dev/null 2>&1
mkdir -p "$dir/osd/ceph-$osd_id"
ceph-osd -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" 2>>"$dir/log/mkfs.log"
ceph-osd -i "$osd_id" 2>>"$dir/log/osd-start.log"
for _ in $(seq 1 120); do
  timeout 10 ceph osd stat 2>/dev/null | grep -q '1 up' && break
  sleep 0.5
done
radosgw -n client.rgw
for _ in $(seq 1 240); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.5
done
curl -s -o /dev/null "http://127.0.0.1:$port/" || { echo "s3_server.sh: radosgw did not answer" >&2; exit 1; }
timeout 60 radosgw-admin user create --uid=jtree-test --display-name=jtree-test \
  --access-key="${AWS_ACCESS_KEY_ID:-testkey}" --secret-key="${AWS_SECRET_ACCESS_KEY:-testsecret}" \
  >/dev/null
echo "s3 server: http://127.0.0.1:$port (Ceph RGW, data in memory, under $dir)"
