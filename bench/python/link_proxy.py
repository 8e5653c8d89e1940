"""A simulated network link in user space: a TCP proxy that delays each request by a round-trip
time and caps each connection's downstream bytes, and counts requests and bytes (for kernels
without `tc netem`; issue 47 item 5).

    python link_proxy.py LISTEN_PORT UPSTREAM_PORT [--rtt-ms 10] [--mib-s 50]

or, in a benchmark's own process (an asyncio loop on a thread):

    proxy = LinkProxy(upstream_port, rtt_ms=10, mib_s=50); proxy.start()
    proxy.mark(); ...; proxy.since_mark()   # {"requests", "bytes_down", "bytes_up", ...}
    proxy.stop()

Per connection:
- opening one costs one round trip (the proxy waits RTT before connecting upstream: the TCP
  handshake of a real link; the client's connect() returns at once, its first request waits);
- every request (client-to-server bytes arriving after the server has answered, or first on
  the connection) is held for one round trip before it is forwarded (its way there and the
  answer's first byte's way back, in one place);
- server-to-client bytes pass a token bucket of MIB_S MiB/s (a burst of 64 KiB), so that a
  connection moves at most that much, as a per-connection cap (a congested path, or a store's
  per-connection limit) would allow.
A request is counted once: the first client-to-server bytes after a response (HTTP/1.1
clients, none of which pipeline here). The counts are the server's side of the link: bytes sent
down (status lines and headers included) and requests, with their first lines (method, path)
and Range headers kept for inspection.
"""
from __future__ import annotations

import argparse
import asyncio
import re
import threading
import time
from typing import Any, Dict, List, Optional

_RANGE = re.compile(rb"\r\nrange: *bytes=([0-9]*)-([0-9]*)", re.IGNORECASE)


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.connections = 0
        self.bytes_down = 0
        self.bytes_up = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.log: List[tuple] = []  # (time, first line, range bytes or None)

    def snapshot(self) -> Dict[str, Any]:
        with self.lock:
            return {"requests": self.requests, "connections": self.connections,
                    "bytes_down": self.bytes_down, "bytes_up": self.bytes_up,
                    "max_in_flight": self.max_in_flight, "log_len": len(self.log)}


class LinkProxy:
    def __init__(self, upstream_port: int, rtt_ms: float = 10.0, mib_s: float = 50.0,
                 listen_port: int = 0, upstream_host: str = "127.0.0.1",
                 chunk: int = 64 * 1024):
        self.upstream = (upstream_host, upstream_port)
        self.rtt = rtt_ms / 1e3
        self.rate = mib_s * 2**20
        self.listen_port = listen_port
        self.chunk = chunk
        self.stats = _Stats()
        self._mark: Dict[str, Any] = self.stats.snapshot()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._server = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()

    # ---- the control side (another thread) -------------------------------------------------
    def start(self) -> int:
        self._thread = threading.Thread(target=self._run, daemon=True, name="link-proxy")
        self._thread.start()
        self._ready.wait(10)
        return self.listen_port

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def mark(self) -> None:
        self._mark = self.stats.snapshot()
        with self.stats.lock:
            self.stats.max_in_flight = self.stats.in_flight

    def since_mark(self) -> Dict[str, Any]:
        time.sleep(0.05)  # (the last bytes of a response already counted: the client has them)
        now = self.stats.snapshot()
        with self.stats.lock:
            log = self.stats.log[self._mark["log_len"]:]
        ranges = [(b - a + 1) for _, _, (a, b) in [e for e in log if e[2] is not None]
                  if a is not None and b is not None]
        return {"requests": now["requests"] - self._mark["requests"],
                "connections": now["connections"] - self._mark["connections"],
                "bytes_down": now["bytes_down"] - self._mark["bytes_down"],
                "bytes_up": now["bytes_up"] - self._mark["bytes_up"],
                "max_in_flight": now["max_in_flight"],
                "ranged": len(ranges),
                "range_bytes_median": (sorted(ranges)[len(ranges) // 2] if ranges else 0),
                "range_bytes_max": max(ranges) if ranges else 0,
                "first_lines": [e[1] for e in log[:8]]}

    # ---- the link (the loop's thread) --------------------------------------------------------
    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)

        async def serve():
            self._server = await asyncio.start_server(self._connection, "127.0.0.1",
                                                      self.listen_port, backlog=1024)
            self.listen_port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(serve())
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            self._loop.close()

    async def _connection(self, creader: asyncio.StreamReader,
                          cwriter: asyncio.StreamWriter) -> None:
        st = self.stats
        with st.lock:
            st.connections += 1
        await asyncio.sleep(self.rtt)  # the handshake's round trip
        try:
            ureader, uwriter = await asyncio.open_connection(*self.upstream)
        except OSError:
            cwriter.close()
            return
        state = {"answered": True}  # (the first bytes up are a request)
        up = asyncio.ensure_future(self._up(creader, uwriter, state))
        down = asyncio.ensure_future(self._down(ureader, cwriter, state))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        for t in (up, down):
            t.cancel()
        for w in (cwriter, uwriter):
            try:
                w.close()
            except Exception:
                pass
        if not state["answered"]:
            with st.lock:
                st.in_flight -= 1

    async def _up(self, creader, uwriter, state) -> None:
        st = self.stats
        while True:
            data = await creader.read(self.chunk)
            if not data:
                return
            if state["answered"]:
                # A new request: held for one round trip, then forwarded.
                state["answered"] = False
                line = data.split(b"\r\n", 1)[0][:120].decode("latin-1", "replace")
                m = _RANGE.search(data)
                rng = None
                if m:
                    rng = (int(m.group(1)) if m.group(1) else None,
                           int(m.group(2)) if m.group(2) else None)
                with st.lock:
                    st.requests += 1
                    st.in_flight += 1
                    st.max_in_flight = max(st.max_in_flight, st.in_flight)
                    st.log.append((time.monotonic(), line, rng))
                await asyncio.sleep(self.rtt)
            with st.lock:
                st.bytes_up += len(data)
            uwriter.write(data)
            await uwriter.drain()

    async def _down(self, ureader, cwriter, state) -> None:
        st = self.stats
        loop = asyncio.get_running_loop()
        burst = min(64 * 1024, self.rate)  # bytes a connection may send at once
        free_at = loop.time()  # when the bucket has room for the next bytes
        while True:
            data = await ureader.read(self.chunk)
            if not data:
                return
            if not state["answered"]:
                state["answered"] = True  # (the response has begun: later bytes up are new)
                with st.lock:
                    st.in_flight -= 1
            # Token bucket: these bytes may leave once the earlier ones have drained at RATE,
            # less a burst's worth.
            now = loop.time()
            free_at = max(free_at, now - burst / self.rate) + len(data) / self.rate
            wait = free_at - burst / self.rate - now
            if wait > 0:
                await asyncio.sleep(wait)
            with st.lock:
                st.bytes_down += len(data)
            cwriter.write(data)
            await cwriter.drain()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("listen_port", type=int)
    ap.add_argument("upstream_port", type=int)
    ap.add_argument("--rtt-ms", type=float, default=10.0)
    ap.add_argument("--mib-s", type=float, default=50.0)
    a = ap.parse_args()
    p = LinkProxy(a.upstream_port, a.rtt_ms, a.mib_s, a.listen_port)
    port = p.start()
    print(f"link proxy on 127.0.0.1:{port} -> {a.upstream_port}, RTT {a.rtt_ms} ms, "
          f"{a.mib_s} MiB/s per connection", flush=True)
    try:
        while True:
            time.sleep(5)
            print(p.stats.snapshot(), flush=True)
    except KeyboardInterrupt:
        p.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
