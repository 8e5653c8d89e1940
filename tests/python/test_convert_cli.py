"""The jtree convert command: through the native CLI (which runs jtree.convert in
$JTREE_PYTHON or python3), through ``python -m jtree.convert`` and the wheel's console script.
Exit status 0 / 1 (``jtree convert: <message>``) / 2 (usage), --verify, -q, --no-overwrite,
--to/--from/--compression, a progress bar on a terminal only, and the message when no Python
with jtree is found."""
import json
import os
import pty
import subprocess
import sys

import numpy as np
import pytest

import jtree
from conftest import require
from convert_util import PACKAGE_ROOT, raw

# The CLI the package installs (as test_cli_large_values.py finds it); JTREE_CLI overrides it
# (a build directory's tools/jtree/jtree).
CLI = os.environ.get("JTREE_CLI") or os.path.join(os.path.dirname(jtree.__file__), "_bin", "jtree")
ENV = dict(os.environ, JTREE_PYTHON=sys.executable,
           PYTHONPATH=os.pathsep.join([PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")]))


def native(*args, env=None):
    assert os.access(CLI, os.X_OK), f"no jtree CLI at {CLI}"
    return subprocess.run([CLI, "convert", *map(str, args)], capture_output=True, text=True,
                          env=env or ENV, timeout=120)


def module(*args):
    return subprocess.run([sys.executable, "-m", "jtree.convert", *map(str, args)],
                          capture_output=True, text=True, env=ENV, timeout=120)


def console_script(*args):
    code = ("import sys; sys.argv = ['jtree', 'convert'] + sys.argv[1:]; "
            "from jtree._cli import main; main()")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, env=ENV, timeout=120)


@pytest.fixture
def st_file(tmp_path):
    sn = require("safetensors.numpy")
    path = tmp_path / "m.safetensors"
    sn.save_file({"a": np.arange(10, dtype=np.float32), "b": np.ones((2, 3), np.int8)},
                 str(path), metadata={"format": "np"})
    return path


def test_native_cli_usage_lists_convert():
    out = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "convert SRC DST" in out.stdout
    # which Python runs it, for both ways jtree is installed
    assert "pip-installed jtree in its own" in out.stdout and "$JTREE_PYTHON" in out.stdout


@pytest.mark.parametrize("run", [native, module, console_script],
                         ids=["native", "python -m", "console script"])
def test_convert_commands(tmp_path, st_file, run):
    dst = tmp_path / "m.jtree"
    r = run(st_file, dst, "--verify")
    assert r.returncode == 0, r.stderr
    assert "verified" in r.stderr and str(st_file) in r.stderr
    back = jtree.load(str(dst))
    assert raw(back["a"]) == raw(np.arange(10, dtype=np.float32))
    # -q: silent
    r = run(st_file, dst, "-q", "--compression", "none")
    assert r.returncode == 0 and r.stderr == "" and r.stdout == ""
    # --no-overwrite: exit 1, the file kept
    before = dst.read_bytes()
    r = run(st_file, dst, "--no-overwrite")
    assert r.returncode == 1 and r.stderr.startswith("jtree convert: ") and "exists" in r.stderr
    assert dst.read_bytes() == before
    # out again, and --to/--from
    out = tmp_path / "out.bin"
    r = run(dst, out, "--to", "safetensors", "-q")
    assert r.returncode == 0, r.stderr
    r = run(out, tmp_path / "again.jtree", "--from", "safetensors", "-q", "--verify")
    assert r.returncode == 0, r.stderr
    # a hostile input: exit 1 naming the file, nothing written
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 8 + b"{}")
    r = run(bad, tmp_path / "bad.jtree")
    assert r.returncode == 1 and "jtree convert: " in r.stderr and str(bad) in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "bad.jtree").exists()
    # usage errors: exit 2
    r = run()
    assert r.returncode == 2 and "usage: jtree convert" in r.stderr
    r = run(st_file, dst, "--compression", "lz4")
    assert r.returncode == 2
    r = run("--help")
    assert r.returncode == 0 and "--verify" in r.stdout and "--allow-pickle" in r.stdout
    assert f"Running in: {sys.executable}\n" in r.stdout  # which Python converts
    assert "--json" in r.stdout and "--max-shard-size" in r.stdout


@pytest.mark.parametrize("run", [native, module, console_script],
                         ids=["native", "python -m", "console script"])
def test_convert_json_and_shards(tmp_path, st_file, run):
    """--json: the summary as one JSON object on stdout, nothing on stderr (no bar, no
    text); --max-shard-size into a directory writes a Hugging Face sharded checkpoint."""
    dst = tmp_path / "m.jtree"
    r = run(st_file, dst, "--json", "--verify")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    got = json.loads(r.stdout)
    assert got["src"] == str(st_file) and got["dst"] == got["output"] == str(dst)
    assert (got["src_format"], got["dst_format"], got["leaves"], got["array_bytes"],
            got["verified"]) == ("safetensors", "jtree", 2, 46, True)
    assert got["seconds"] >= 0 and "2 tensors" in got["description"]
    out = tmp_path / "hf"
    r = run(dst, str(out) + "/", "--max-shard-size", "40", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["output"] == str(out / "model.safetensors.index.json")
    assert sorted(os.listdir(out)) == ["model-00001-of-00002.safetensors",
                                       "model-00002-of-00002.safetensors",
                                       "model.safetensors.index.json"]
    r = run(dst, out, "--json")  # a directory without safetensors asked for: exit 1, why
    assert r.returncode == 1 and r.stdout == "" and "is a directory" in r.stderr
    r = run(dst, out / "x.safetensors", "--max-shard-size", "5XB")
    assert r.returncode == 1 and "max_shard_size" in r.stderr


def test_native_cli_without_python(tmp_path, st_file):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = dict(os.environ, JTREE_PYTHON=str(tmp_path / "no-such-python"), PATH=str(empty))
    r = native(st_file, tmp_path / "x.jtree", env=env)
    assert r.returncode == 1
    assert "pip install jtree-arrays" in r.stderr and "no-such-python" in r.stderr
    assert not (tmp_path / "x.jtree").exists()
    # --help still says what the command is (exit 0), and why its full help is missing.
    r = native("--help", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: jtree convert SRC DST") and "GGUF" in r.stdout
    assert "pip install jtree-arrays" in r.stdout and "no-such-python" in r.stdout
    # a Python without jtree: passed over for the next, then the same message
    (empty / "python3").symlink_to(sys.executable)
    env = dict(env, PYTHONPATH="", PYTHONNOUSERSITE="1", JTREE_PYTHON="")
    r = native(st_file, tmp_path / "x.jtree", env=dict(env, PYTHONPATH=str(tmp_path)))
    # (the venv's own site-packages may hold an installed jtree: then that one converts)
    if r.returncode == 1:
        assert "python3: jtree.convert does not import" in r.stderr
    else:
        assert r.returncode == 0, r.stderr


def test_progress_bar_only_on_a_terminal(tmp_path, st_file):
    dst = tmp_path / "p.jtree"
    r = module(st_file, dst)
    assert r.returncode == 0 and "\r" not in r.stderr and "%" not in r.stderr
    master, slave = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-m", "jtree.convert", str(st_file), str(dst)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                           env=ENV, timeout=120)
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        text = b"".join(chunks).decode()
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert p.returncode == 0
    assert "100%" in text and "\r" in text
