"""A minimal nginx on 127.0.0.1 serving the benchmark's work directory, with an access log of
every request's Range header and bytes sent: the server's own count of what a client fetched.

(tests/remote/servers.sh starts the remote tests' servers with access logging off, plus TLS, a
fault proxy and S3; the benchmark needs only plain HTTP and the log.)
"""
from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Dict


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Nginx:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.dir = tempfile.mkdtemp(prefix="jtree-bench-nginx-")
        self.port = free_port()
        self.log = os.path.join(self.dir, "access.log")
        self.pos = 0

    def start(self) -> None:
        user = "user nobody nogroup;" if os.geteuid() == 0 else ""
        conf = os.path.join(self.dir, "nginx.conf")
        d = self.dir
        with open(conf, "w") as f:
            f.write(f"""{user}
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  log_format bench '$request_method $uri "$http_range" $status $bytes_sent $body_bytes_sent';
  access_log {self.log} bench;
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  keepalive_timeout 60s;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  server {{ listen 127.0.0.1:{self.port}; root {self.root}; }}
}}
""")
        # nginx's workers (user nobody) must reach the files.
        os.chmod(self.dir, 0o755)
        os.chmod(self.root, 0o755)
        subprocess.run(["nginx", "-c", conf, "-e", os.path.join(d, "error.log")], check=True)
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1)
                break
            except urllib.error.HTTPError:
                break  # nginx answered (403/404): it is up
            except OSError:
                time.sleep(0.05)
        open(self.log, "a").close()

    def publish(self, path: str) -> str:
        """The URL of a file in the root (made readable by nginx's workers)."""
        os.chmod(path, 0o644)
        rel = os.path.relpath(os.path.abspath(path), self.root)
        return f"http://127.0.0.1:{self.port}/{rel}"

    def mark(self) -> None:
        self.pos = os.path.getsize(self.log)

    def since_mark(self) -> Dict[str, Any]:
        time.sleep(0.05)  # nginx writes the line once the response is done
        with open(self.log) as f:
            f.seek(self.pos)
            lines = [ln.split() for ln in f.read().splitlines() if ln.strip()]
        return {"requests": len(lines),
                "bytes_sent": sum(int(ln[-2]) for ln in lines),
                "body_bytes": sum(int(ln[-1]) for ln in lines),
                "ranges": [ln[2].strip('"') for ln in lines][:50]}

    def stop(self) -> None:
        pid_file = os.path.join(self.dir, "nginx.pid")
        if os.path.exists(pid_file):
            pid = int(open(pid_file).read().strip())
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                    time.sleep(0.1)
                except ProcessLookupError:
                    break
