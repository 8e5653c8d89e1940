#!/usr/bin/env bash
# Starts and stops the real servers of the remote tests, all on 127.0.0.1 with free ports:
#   - nginx serving DIR/www over HTTP and over HTTPS (HTTP/2), with a certificate from a
#     throwaway CA made here (DIR/ca/ca.crt); /norange/... serves the same files ignoring
#     Range headers (max_ranges 0);
#   - the fault-injecting proxy (fault_proxy.py) in front of nginx's HTTP port;
#   - Ceph RGW as the S3 server (s3_server.sh), unless JTREE_TEST_NO_S3=1.
#
#   servers.sh start DIR [nginx|all]   writes DIR/env (shell "export" lines) describing them
#   servers.sh stop DIR                stops everything it started (by PID) and removes DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:?usage: servers.sh start DIR [nginx|all] | stop DIR}
dir=${2:?DIR}
what=${3:-all}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
  [ -d "$dir" ] || return 0
  if [ -f "$dir/proxy.pid" ]; then
    kill "$(cat "$dir/proxy.pid")" 2>/dev/null || true
  fi
  if [ -f "$dir/nginx/nginx.pid" ]; then
    kill "$(cat "$dir/nginx/nginx.pid")" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$(cat "$dir/nginx/nginx.pid" 2>/dev/null)" 2>/dev/null || break
      sleep 0.1
    done
  fi
  if [ -d "$dir/s3" ]; then "$here/s3_server.sh" stop "$dir/s3"; fi
  rm -rf "$dir"
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "servers.sh: unknown command $cmd" >&2; exit 2; }

mkdir -p "$dir"/{www,nginx,ca,log}
# nginx's workers run as "nobody" when started by root: they must be able to read the files.
chmod 755 "$dir" "$dir/www"

# ---- a throwaway CA and a certificate for 127.0.0.1 / localhost -----------------------------
ca=$dir/ca
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=jtree test CA" -keyout "$ca/ca.key" -out "$ca/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
  -keyout "$ca/server.key" -out "$ca/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > "$ca/ext.cnf"
openssl x509 -req -in "$ca/server.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial \
  -days 2 -extfile "$ca/ext.cnf" -out "$ca/server.crt" 2>/dev/null
chmod 644 "$ca/server.key"

# ---- nginx -----------------------------------------------------------------------------------
http_port=$(free_port)
https_port=$(free_port)
user_line=""
[ "$(id -u)" = 0 ] && user_line="user nobody nogroup;"
cat > "$dir/nginx/nginx.conf" <<CONF
$user_line
worker_processes 2;
pid $dir/nginx/nginx.pid;
error_log $dir/log/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  keepalive_timeout 60s;
  client_body_temp_path $dir/nginx/body;
  proxy_temp_path $dir/nginx/proxy;
  fastcgi_temp_path $dir/nginx/fastcgi;
  uwsgi_temp_path $dir/nginx/uwsgi;
  scgi_temp_path $dir/nginx/scgi;
  server {
    listen 127.0.0.1:$http_port;
    root $dir/www;
    location /norange/ { alias $dir/www/; max_ranges 0; }
  }
  server {
    listen 127.0.0.1:$https_port ssl http2;
    ssl_certificate $ca/server.crt;
    ssl_certificate_key $ca/server.key;
    root $dir/www;
  }
}
CONF
nginx -c "$dir/nginx/nginx.conf" -e "$dir/log/nginx-error.log"
for _ in $(seq 1 50); do
  curl -s -o /dev/null "http://127.0.0.1:$http_port/" && break
  sleep 0.1
done

# ---- the fault proxy -------------------------------------------------------------------------
proxy_port=$(free_port)
python3 "$here/fault_proxy.py" "$proxy_port" "$http_port" >"$dir/log/proxy.log" 2>&1 &
echo $! > "$dir/proxy.pid"
for _ in $(seq 1 50); do
  curl -s -o /dev/null "http://127.0.0.1:$proxy_port/_stats" && break
  sleep 0.1
done

{
  echo "export JTREE_TEST_WWW=$dir/www"
  echo "export JTREE_TEST_HTTP=http://127.0.0.1:$http_port"
  echo "export JTREE_TEST_HTTPS=https://localhost:$https_port"
  echo "export JTREE_TEST_CA=$ca/ca.crt"
  echo "export JTREE_TEST_PROXY=http://127.0.0.1:$proxy_port"
} > "$dir/env"

# ---- S3 (Ceph RGW) ---------------------------------------------------------------------------
if [ "$what" = all ] && [ "${JTREE_TEST_NO_S3:-0}" != 1 ]; then
  s3_port=$(free_port)
  mon_port=$(free_port)
  AWS_ACCESS_KEY_ID=testkey AWS_SECRET_ACCESS_KEY=testsecret \
    "$here/s3_server.sh" start "$dir/s3" "$s3_port" "$mon_port" >"$dir/log/s3.log" 2>&1 || {
      cat "$dir/log/s3.log" >&2
      exit 1
    }
  {
    echo "export JTREE_TEST_S3_ENDPOINT=http://127.0.0.1:$s3_port"
    echo "export JTREE_TEST_S3_VHOST_ENDPOINT=http://localhost:$s3_port"
    echo "export JTREE_TEST_S3_KEY=testkey"
    echo "export JTREE_TEST_S3_SECRET=testsecret"
  } >> "$dir/env"
fi
echo "servers up; environment in $dir/env"
