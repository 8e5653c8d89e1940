"""A TCP relay that counts the bytes passing each way: the test points one process at it
instead of the S3 server to measure what that process sent, independently of jtree's own
counters. Runs in a thread of the test process."""
import asyncio
import threading


class Relay:
    """Listens on 127.0.0.1:<port> and forwards every connection to 127.0.0.1:<upstream>."""

    def __init__(self, upstream_port: int):
        self.upstream = upstream_port
        self.sent = 0       # client -> server (requests and their bodies)
        self.received = 0   # server -> client
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        # Stopped: close the listener and let the open connections' tasks finish quietly.
        server.close()
        tasks = asyncio.all_tasks(self._loop)
        for t in tasks:
            t.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _serve(self, reader, writer) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.close()
            return

        async def pump(src, dst, up: bool) -> None:
            try:
                while True:
                    data = await src.read(1 << 16)
                    if not data:
                        break
                    if up:
                        self.sent += len(data)
                    else:
                        self.received += len(data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                if not dst.is_closing():
                    dst.close()

        try:
            await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))
        except asyncio.CancelledError:
            for w in (writer, up_writer):
                w.close()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
