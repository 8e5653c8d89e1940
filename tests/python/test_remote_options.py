"""jtree.RemoteOptions: remote settings per call (issue 47 item 4). Without servers: the values
are checked by the library when the object is made, remote= reaches the native open and write
(a refused port fails within the settings given), and remote= where it would go unused (a
local path, a file object, a File already open) is refused, never ignored. The reads and
writes against real servers are in tests/remote/test_python_remote.py."""
import dataclasses
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import jtree

# A TCP port nothing listens on: a connection is refused at once.
REFUSED = "http://127.0.0.1:9/x.jtree"


def test_fields_map_the_cxx_options_and_default_to_none():
    o = jtree.RemoteOptions()
    assert o.settings() == {}
    names = [f.name for f in dataclasses.fields(jtree.RemoteOptions)]
    for name in ("endpoint", "region", "profile", "access_key_id", "secret_access_key",
                 "session_token", "addressing", "part_size", "upload_concurrency",
                 "max_retries", "deadline", "connect_timeout", "stall_timeout",
                 "max_concurrency", "max_request_bytes", "fetch_bytes", "verify_tls", "ca_file",
                 "http_headers", "allow_full_download"):
        assert name in names
    # Every field is one the native module knows (an unknown one would raise).
    jtree._jtree.check_remote_options({"max_retries": 0, "addressing": "path",
                                       "part_size": 5 << 20, "http_headers": ["A: b"]})


def test_frozen_and_hashable():
    o = jtree.RemoteOptions(endpoint="http://127.0.0.1:7480", max_concurrency=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.max_concurrency = 8
    assert hash(o) == hash(jtree.RemoteOptions(endpoint="http://127.0.0.1:7480",
                                               max_concurrency=4))


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_concurrency=0), "max_concurrency must be >= 1"),
    (dict(max_retries=-1), "max_retries must be >= 0"),
    (dict(deadline=0), "deadline must be > 0"),
    (dict(connect_timeout=float("nan")), "connect_timeout must be > 0"),
    (dict(part_size=1 << 20), "part_size must be between 5 MiB and 5 GiB"),
    (dict(fetch_bytes=-1), "fetch_bytes must be >= 0"),
    (dict(addressing="sideways"), "addressing must be"),
    (dict(http_headers=["no colon"]), "is not \"Name: value\""),
    (dict(http_headers={"X-A": "b\r\nX-Injected: c"}), "line break"),
    (dict(secret_access_key="s"), "access_key_id and secret_access_key go together"),
    (dict(session_token="t"), "session_token needs"),
])
def test_bad_values_are_refused_when_made_naming_the_setting(kwargs, message):
    with pytest.raises(jtree.InvalidArgumentError, match=message.replace("(", r"\(")):
        jtree.RemoteOptions(**kwargs)


def test_headers_from_a_dict_and_secrets_hidden_in_repr():
    o = jtree.RemoteOptions(http_headers={"Authorization": "Bearer tok"},
                            access_key_id="AKIA", secret_access_key="very-secret",
                            session_token="tok2")
    assert o.http_headers == ("Authorization: Bearer tok",)
    r = repr(o)
    assert "AKIA" in r and "very-secret" not in r and "tok" not in r.replace("session_token", "")


def test_remote_for_a_local_path_is_refused_not_ignored(tmp_path):
    path = str(tmp_path / "a.jtree")
    jtree.save({"w": np.arange(4)}, path)
    o = jtree.RemoteOptions(max_retries=1)
    local = "applies to http\\(s\\):// and s3:// URLs"
    for call in (lambda: jtree.open(path, remote=o), lambda: jtree.load(path, remote=o),
                 lambda: jtree.load_pytreedef(path, remote=o),
                 lambda: jtree.nonblocking_load(path, remote=o),
                 lambda: jtree.save({"w": 1}, path, remote=o),
                 lambda: jtree.nonblocking_save({"w": 1}, path, remote=o).result(),
                 lambda: jtree.save({"w": 1}, path, partial_write=True, remote=o),
                 lambda: jtree.TensorParallel(0, 2).plan(path, remote=o)):
        with pytest.raises(jtree.InvalidArgumentError, match=local):
            call()
    with pytest.raises(jtree.InvalidArgumentError, match="file object"):
        jtree.save({"w": 1}, io.BytesIO(), remote=o)
    with pytest.raises(jtree.InvalidArgumentError, match="file object or bytes"):
        jtree.open(jtree.dumps({"w": 1}), remote=o)
    with jtree.open(path) as f:
        with pytest.raises(jtree.InvalidArgumentError, match="open already"):
            jtree.load(f, remote=o)
        with pytest.raises(jtree.InvalidArgumentError, match="open already"):
            jtree.load(f["w"], remote=o)
        with pytest.raises(jtree.InvalidArgumentError, match="open already"):
            jtree.TensorParallel(0, 2).plan(f, remote=o)
    assert jtree.load(path)["w"].tolist() == [0, 1, 2, 3]  # the file was not touched


def test_remote_is_a_remote_options():
    with pytest.raises(TypeError, match="jtree.RemoteOptions"):
        jtree.load(REFUSED, remote={"max_retries": 0})


def test_a_bad_setting_is_refused_before_any_request():
    # The native open checks the settings too (a dict from RemoteOptions.settings() that was
    # changed after the check): nothing is sent, the error names the setting.
    class Sneaky(jtree.RemoteOptions):
        def settings(self):
            return {"max_concurrency": 0}
    with pytest.raises(jtree.InvalidArgumentError, match="max_concurrency"):
        jtree.open(REFUSED, remote=Sneaky.__new__(Sneaky))


def test_the_settings_reach_the_native_s3_open(monkeypatch):
    # The endpoint given wins over AWS_ENDPOINT_URL_S3 (a port that refuses, named in the error).
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    o = jtree.RemoteOptions(endpoint="http://127.0.0.1:9", max_retries=0, region="us-east-1")
    with pytest.raises(jtree.StorageError, match="127.0.0.1 port 9"):
        jtree.load_pytreedef("s3://bkt/x.jtree", remote=o)
    o = jtree.RemoteOptions(endpoint="not-a-url")
    with pytest.raises(jtree.InvalidArgumentError, match="not-a-url"):
        jtree.save({"w": 1}, "s3://bkt/x.jtree", remote=o)


def test_compact_and_commit_segments_take_remote_and_refuse_it_for_local_paths(tmp_path):
    path = str(tmp_path / "c.jtree")
    jtree.save({"w": np.arange(4)}, path)
    o = jtree.RemoteOptions(max_retries=1)
    with pytest.raises(jtree.InvalidArgumentError, match="applies to http"):
        jtree.compact(path, remote=o)
    with pytest.raises(jtree.InvalidArgumentError, match="applies to http"):
        jtree.commit_segments(path, 2, remote=o)
    assert jtree.compact(path).file_size > 0


def test_convert_takes_remote_for_a_jtree_url_and_refuses_it_elsewhere(tmp_path):
    src = str(tmp_path / "m.npz")
    np.savez(src, w=np.arange(4))
    o = jtree.RemoteOptions(max_retries=1)
    with pytest.raises(jtree.InvalidArgumentError, match="applies to http\\(s\\):// and s3://"):
        jtree.convert(src, str(tmp_path / "m.jtree"), remote=o)
    with pytest.raises(jtree.InvalidArgumentError,
                       match="remote= applies to a .jtree destination on object storage"):
        jtree.convert(src, str(tmp_path / "m.safetensors"), remote=o)
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]  # nothing written


def test_convert_cli_remote_flags_are_remote_options():
    from jtree.convert import _cli

    args = _cli.parser().parse_args(["m.npz", "s3://b/m.jtree", "--endpoint", "http://h:1",
                                     "--concurrency", "3", "--no-verify-tls", "--header",
                                     "A: b", "--timeout", "20", "--part-size", str(8 << 20)])
    o = _cli.remote_options(args)
    assert (o.endpoint, o.max_concurrency, o.verify_tls, o.http_headers, o.deadline,
            o.part_size) == ("http://h:1", 3, False, ("A: b",), 20.0, 8 << 20)
    assert _cli.remote_options(_cli.parser().parse_args(["m.npz", "m.jtree"])) is None
    # A bad value fails the command before any work, naming the setting.
    r = subprocess.run([sys.executable, "-m", "jtree.convert", "missing.npz", "s3://b/m.jtree",
                        "--retries", "-1", "-q"], capture_output=True, text=True)
    assert r.returncode == 1 and "max_retries" in r.stderr, r.stderr


def test_remove_object_takes_remote_settings_and_refuses_them_for_a_local_file(tmp_path):
    # (What a failed multi-process save's cleanup calls with the save's remote=.)
    from jtree import _jtree, _remote

    path = str(tmp_path / "seg.jtree")
    jtree.save({"w": 1}, path)
    with pytest.raises(jtree.InvalidArgumentError, match="applies to http\\(s\\):// and s3://"):
        _jtree.remove_object(path, _remote.settings(jtree.RemoteOptions(max_retries=1)))
    assert os.path.exists(path)
    assert _jtree.remove_object(path) is True and not os.path.exists(path)
