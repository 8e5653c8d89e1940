#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy in front of nginx, for jtree's remote tests.

    fault_proxy.py LISTEN_PORT UPSTREAM_PORT

The first path segment chooses the faults; the rest is the path on nginx:

    http://127.0.0.1:PORT/<faults>/<path on nginx>

<faults> is "ok" or a comma-separated list of NAME or NAME=N. Counted faults hit the first N
attempts of each distinct request (method, path, Range), so that a client that retries gets
through; "always..." faults hit every attempt:

    e503=N   answer 503 (Retry-After: 0)        e429=N   answer 429 (Retry-After: 0)
    drop=N   send the headers and half the body, then reset the connection
    trunc=N  send the headers and half the body, then close the connection cleanly
    stall=N  send the headers and half the body, then stop sending (for 120 s)
    reset=N  close the connection without an answer
    badsuffix  answer "Range: bytes=-N" with the first N+1 bytes (as npm's s3rver does)
    norange    drop the Range header (the whole object, 200)
    always503, alwaysstall, alwaysdrop   persistent faults
    rand=P     each attempt fails with probability P% (a random fault of the counted kinds),
               seeded by the request, so that runs repeat

Requests with an absolute URL ("GET http://host:port/x HTTP/1.1") are forwarded as a plain
forward proxy (the http_proxy test). GET /_stats answers the counters as JSON.
"""
import asyncio
import hashlib
import json
import random
import sys

COUNTED = ("e503", "e429", "drop", "trunc", "stall", "reset")
stats = {"requests": 0, "faults": 0, "forward_proxied": 0}
attempts = {}


def parse_faults(spec):
    faults = {}
    for item in spec.split(","):
        if not item or item == "ok":
            continue
        name, _, value = item.partition("=")
        faults[name] = int(value) if value else 1
    return faults


async def read_head(reader):
    data = await reader.readuntil(b"\r\n\r\n")
    lines = data.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(":")
            headers.append((k.strip(), v.strip()))
    return method, target, headers


async def fetch_upstream(host, port, method, path, headers):
    r, w = await asyncio.open_connection(host, port)
    out = [f"{method} {path} HTTP/1.1"]
    for k, v in headers:
        if k.lower() not in ("connection", "proxy-connection", "keep-alive"):
            out.append(f"{k}: {v}")
    out.append("Connection: close")
    w.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
    await w.drain()
    head = await r.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0]
    resp_headers = []
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(":")
            resp_headers.append((k.strip(), v.strip()))
    length = None
    for k, v in resp_headers:
        if k.lower() == "content-length":
            length = int(v)
    if method == "HEAD":
        body = b""
    elif length is not None:
        body = await r.readexactly(length)
    else:
        body = await r.read()
    w.close()
    return status_line, resp_headers, body


def render(status_line, headers, keep_alive=True):
    out = [status_line]
    for k, v in headers:
        if k.lower() != "connection":
            out.append(f"{k}: {v}")
    out.append("Connection: keep-alive" if keep_alive else "Connection: close")
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")


def choose_fault(faults, key):
    """The fault for this attempt of request `key`, or None."""
    n = attempts.get(key, 0)
    attempts[key] = n + 1
    for name in ("always503", "alwaysstall", "alwaysdrop"):
        if name in faults:
            return name[len("always"):]
    for name in COUNTED:
        if name in faults and n < faults[name]:
            return name
    if "rand" in faults:
        rng = random.Random(hashlib.sha256(f"{key}/{n}".encode()).digest())
        if rng.random() * 100 < faults["rand"]:
            return rng.choice(COUNTED[:-1] if n < 20 else ["e503"])
    return None


async def serve_fault(writer, fault, status_line, headers, body):
    """Writes the response with `fault` applied; returns False when the connection is done."""
    if fault in ("503", "e503", "429", "e429"):
        code = "503 Service Unavailable" if "503" in fault else "429 Too Many Requests"
        msg = b"injected fault\n"
        writer.write(render(f"HTTP/1.1 {code}", [("Retry-After", "0"),
                                                  ("Content-Length", str(len(msg)))]) + msg)
        await writer.drain()
        return True
    if fault == "reset":
        writer.transport.abort()
        return False
    writer.write(render(status_line, headers, keep_alive=False))
    writer.write(body[: len(body) // 2])
    await writer.drain()
    if fault in ("stall",):
        await asyncio.sleep(120)
    if fault in ("drop",):
        writer.transport.abort()
    else:
        writer.close()
    return False


async def handle(reader, writer, upstream_port):
    try:
        while True:
            try:
                method, target, headers = await read_head(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            stats["requests"] += 1
            if target == "/_stats":
                body = json.dumps(stats).encode()
                writer.write(render("HTTP/1.1 200 OK", [("Content-Length", str(len(body))),
                                                        ("Content-Type", "application/json")]) + body)
                await writer.drain()
                continue
            if target.startswith("http://"):
                # A forward-proxy request: "GET http://host:port/path".
                stats["forward_proxied"] += 1
                rest = target[len("http://"):]
                hostport, _, path = rest.partition("/")
                host, _, port = hostport.partition(":")
                st, hs, body = await fetch_upstream(host, int(port or 80), method, "/" + path,
                                                    headers)
                writer.write(render(st, hs) + body)
                await writer.drain()
                continue
            _, spec, path = target.split("/", 2)
            faults = parse_faults(spec)
            rng = next((v for k, v in headers if k.lower() == "range"), "")
            up_headers = list(headers)
            if "norange" in faults:
                up_headers = [(k, v) for k, v in headers if k.lower() != "range"]
            if "badsuffix" in faults and rng.startswith("bytes=-"):
                n = int(rng[len("bytes=-"):])
                up_headers = [(k, v) for k, v in headers if k.lower() != "range"]
                up_headers.append(("Range", f"bytes=0-{n}"))
            key = f"{spec} {method} /{path} {rng}"
            fault = choose_fault(faults, key)
            status_line, resp_headers, body = await fetch_upstream(
                "127.0.0.1", upstream_port, method, "/" + path, up_headers)
            if fault is None:
                writer.write(render(status_line, resp_headers) + body)
                await writer.drain()
                continue
            stats["faults"] += 1
            if not await serve_fault(writer, fault, status_line, resp_headers, body):
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if not writer.is_closing():
            writer.close()


async def main():
    port, upstream = int(sys.argv[1]), int(sys.argv[2])
    server = await asyncio.start_server(lambda r, w: handle(r, w, upstream), "127.0.0.1", port,
                                        limit=1 << 20)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
