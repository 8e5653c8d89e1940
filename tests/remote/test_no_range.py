"""A server that ignores HTTP Range requests (issue 23, item 8): Python's http.server, started
here, answers every GET with 200 and the whole file. A read must not silently become a
download of the whole file: it fails with NotSupportedError naming the URL, having received
none of the body, unless allow_full_download / --allow-full-download is given, which downloads
the file once and serves the reads from it.

Needs no other server: run by scripts/test_remote.sh (JTREE_CLI: the jtree command to test;
without it the CLI cases use the package's own), or alone with the package importable.
"""
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading

import numpy as np
import pytest

jtree = pytest.importorskip("jtree")

MiB = 1 << 20


class _Counting(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler (which ignores Range), counting the body bytes it managed to
    hand to the socket."""

    sent = 0
    lock = threading.Lock()

    def copyfile(self, source, outputfile):
        while True:
            buf = source.read(64 * 1024)
            if not buf:
                return
            try:
                outputfile.write(buf)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client stopped the transfer
            with _Counting.lock:
                _Counting.sent += len(buf)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Counting, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def served(server):
    """A 32 MiB checkpoint (random: it does not compress) in the server's root."""
    url, root = server
    rng = np.random.default_rng(7)
    tree = {"emb": rng.standard_normal((8192, 1024)).astype(np.float32),
            "b": np.arange(16, dtype=np.float32), "step": 12}
    path = root / "ckpt.jtree"
    jtree.save(tree, str(path))
    return tree, f"{url}/ckpt.jtree", path


def _cli():
    cli = os.environ.get("JTREE_CLI")
    if cli:
        return cli
    bundled = os.path.join(os.path.dirname(jtree.__file__), "_bin", "jtree")
    if os.access(bundled, os.X_OK):
        return bundled
    return shutil.which("jtree")


def test_python_refuses_and_transfers_almost_nothing(served):
    tree, url, path = served
    size = path.stat().st_size
    before = _Counting.sent
    with pytest.raises(jtree.NotSupportedError) as e:
        jtree.open(url)
    msg = str(e.value)
    assert url in msg
    assert "server ignores HTTP Range requests (answered 200 with the whole body" in msg
    assert "allow_full_download / --allow-full-download" in msg
    # What reached the socket before the client closed it: socket buffers, not the file.
    assert _Counting.sent - before < size // 4, (_Counting.sent - before, size)
    with pytest.raises(jtree.NotSupportedError):
        jtree.load(url)


def test_python_allow_full_download(served):
    tree, url, path = served
    size = path.stat().st_size
    with jtree.open(url, allow_full_download=True) as f:
        np.testing.assert_array_equal(f["emb"][10:20], tree["emb"][10:20])
        np.testing.assert_array_equal(f["emb"][8000:8010, 5:9], tree["emb"][8000:8010, 5:9])
        assert f["step"] == 12
        io = f.io_stats()
        # The refused range requests received nothing; the download got the file once.
        assert io["bytes_read"] == size, (io, size)
    got = jtree.load(url, allow_full_download=True)
    np.testing.assert_array_equal(got["emb"], tree["emb"])
    np.testing.assert_array_equal(got["b"], tree["b"])


def test_python_every_opening_call_takes_allow_full_download(served):
    # load_pytreedef and nonblocking_load open the URL too: they refuse by default and
    # download once when allowed, like open and load.
    tree, url, _path = served
    with pytest.raises(jtree.NotSupportedError):
        jtree.load_pytreedef(url)
    with pytest.raises(jtree.NotSupportedError):
        jtree.nonblocking_load(url)
    spec = jtree.load_pytreedef(url, allow_full_download=True)
    assert spec["emb"].shape == (8192, 1024) and str(spec["emb"].dtype) == "float32"
    fut = jtree.nonblocking_load(url, allow_full_download=True)
    assert fut.pytree["b"].shape == (16,)
    got = fut.result()
    np.testing.assert_array_equal(got["emb"], tree["emb"])
    assert got["step"] == 12


def test_cli_refuses_and_allows(served):
    cli = _cli()
    if cli is None:
        pytest.fail("no jtree command (set JTREE_CLI)")
    tree, url, path = served
    r = subprocess.run([cli, "ls", url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert url in r.stderr and "server ignores HTTP Range requests" in r.stderr, r.stderr
    assert "--allow-full-download" in r.stderr
    r = subprocess.run([cli, "ls", "--allow-full-download", url], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "emb" in r.stdout
    r = subprocess.run([cli, "get", "--json", "--allow-full-download", url, "emb[3, :4]"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["shape"] == [4]
    np.testing.assert_array_equal(np.array(d["data"], np.float32), tree["emb"][3, :4])
    # diff of the remote file and its local copy: equal, by checksums (same bytes, same seeds).
    r = subprocess.run([cli, "diff", "--json", "--allow-full-download", url, str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["equal"] and d["compared"]["checksums"] >= 1 and d["compared"]["data"] == 0, d
