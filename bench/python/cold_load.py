"""Cold loads, one per fresh process, with their CPU time; and the disk's own rate.

    .venv/bin/python bench/python/cold_load.py load PATH [--warm] [--buffered]
    .venv/bin/python bench/python/cold_load.py disk PATH

`load`: evicts PATH from the page cache (fsync + POSIX_FADV_DONTNEED; with --warm reads it in
instead), then times `jtree.load(PATH)` into NumPy arrays in this process (jtree imported
before the clock) and prints one JSON line: wall seconds, CPU seconds (user + system), system
seconds, and the bytes the process read (/proc/self/io: read_bytes from the disk, rchar through
read calls; a load through the file's map reads no rchar). --buffered refuses O_DIRECT first
(the test hook _refuse_direct_open_for_tests: as on a file system without it), so that the
same build reads through the page cache as before cold reads existed.
`disk`: the disk's rate over PATH, evicted before each: `dd iflag=direct bs=8M`, then 8 threads
of 8 MiB O_DIRECT reads into reused buffers of huge pages and of 4 KiB pages. (A block device
takes a bounded number of memory segments per request, so physically scattered 4 KiB pages
make small requests; these 4 KiB buffers are faulted in one after another and usually come
out contiguous, which hides that: see bench/README.md, "Cold reads".)
"""
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shard_load import _evict, dd_rate, parallel_direct_rate  # noqa: E402


def _io() -> dict:
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f.read().splitlines())}


def load(path: str, warm: bool, buffered: bool) -> None:
    if warm:
        with open(path, "rb") as f:
            while f.read(64 << 20):
                pass
    else:
        _evict(path)
    import jtree

    if buffered:
        jtree._jtree._refuse_direct_open_for_tests(True)
    io0, r0 = _io(), resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    tree = jtree.load(path)
    seconds = time.perf_counter() - t0
    io1, r1 = _io(), resource.getrusage(resource.RUSAGE_SELF)
    del tree
    print(json.dumps({
        "path": path, "warm": warm, "buffered": buffered, "seconds": seconds,
        "cpu_seconds": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
        "system_seconds": r1.ru_stime - r0.ru_stime,
        "read_bytes": io1["read_bytes"] - io0["read_bytes"], "rchar": io1["rchar"] - io0["rchar"]}))


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] not in ("load", "disk"):
        print(__doc__)
        return 2
    path = sys.argv[2]
    if sys.argv[1] == "load":
        load(path, "--warm" in sys.argv[3:], "--buffered" in sys.argv[3:])
    else:
        print(json.dumps({"path": path, "dd_gbps": dd_rate(path),
                          "direct_8x8MiB_huge_pages_gbps": parallel_direct_rate(path),
                          "direct_8x8MiB_4k_pages_gbps": parallel_direct_rate(path, huge=False)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
