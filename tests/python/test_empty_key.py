"""The empty string key has a key path of its own, "\\e" (issue 21): a top-level key "" used
to have the path "", the root's, so f.at(""), keys=[""] and `jtree get FILE ""` could not name
it. The rule is the C++ library's (jtree/key_path.h), which Python and the CLI both use."""
import os
import subprocess

import numpy as np
import pytest

import jtree
from jtree import _keypath as kp
from conftest import assert_same

CLI = os.path.join(os.path.dirname(jtree.__file__), "_bin", "jtree")


@pytest.fixture
def saved(tmp_path):
    path = str(tmp_path / "empty_key.jtree")
    tree = {"": np.arange(3, dtype=np.int32), "a": np.arange(2.0), "d": {"": 7, "e": "x"},
            "m": {"": np.ones(2, np.float32)}}
    jtree.save(tree, path)
    return path, tree


def test_paths_of_the_empty_key_at_the_top_and_below():
    assert kp.join(("",)) == r"\e"
    assert kp.join(("d", "")) == r"d/\e"
    assert kp.join(("", "a")) == r"\e/a"
    assert kp.split(r"\e") == [""] and kp.split("") == []
    assert kp.split(r"d/\e") == ["d", ""]
    # No other key's path changes; a key "\e" is escaped as every backslash is.
    assert kp.join(("e", "a/b", "\\e")) == r"e/a\/b/\\e"
    assert kp.split(r"e/a\/b/\\e") == ["e", "a/b", "\\e"]
    # The spellings of before still split as they did.
    assert kp.split("/a") == ["", "a"] and kp.split("d/") == ["d", ""]


def test_open_addresses_the_empty_key_apart_from_the_root(saved):
    path, tree = saved
    with jtree.open(path) as f:
        assert_same(f[""][...], tree[""])  # a key lookup
        assert_same(f.at(r"\e")[...], tree[""])
        assert f.at(r"\e").path == r"\e"
        assert f.at(r"d/\e") == 7  # (a scalar leaf is its value)
        assert f.at("d")[""] == 7
        assert f.at(r"m/\e").path == r"m/\e"
        assert_same(f.at(r"m/\e")[...], tree["m"][""])
        assert sorted(map(str, f.at("").keys())) == ["", "a", "d", "m"]  # "" is the root


def test_keys_select_the_empty_key(saved):
    path, tree = saved
    out = jtree.load(path, keys=[r"\e"], prune=True)
    assert list(out) == [""]
    assert_same(out[""], tree[""])
    out = jtree.load(path, keys=r"d/\e", prune=True)
    assert out == {"d": {"": 7}}
    with pytest.raises(jtree.NotFoundError, match="matched nothing"):
        jtree.load(path, keys=r"d/\e/zz")


def test_cli_gets_the_empty_key(saved):
    path, _ = saved
    r = subprocess.run([CLI, "get", path, r"\e"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "int32" in r.stdout and "[0, 1, 2]" in r.stdout.replace(" ", ", ").replace(",,", ",")
    r = subprocess.run([CLI, "ls", path], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r"\e" in r.stdout and r"d/\e" in r.stdout
