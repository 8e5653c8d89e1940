"""Names the format says are UTF-8, NamedTuple field names, metadata keys, segment headers
(issue 20 defect 6), and the reader's new refusals (big_int, bool bytes), through the Python
API and the CLI. The files are tests/golden's, assembled with valid hashes so that the rule
itself rejects them (tests/golden/make_golden.cc)."""
import collections
import os
import subprocess

import pytest

import jtree

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
CLI = os.path.join(os.path.dirname(jtree.__file__), "_bin", "jtree")


def golden(name):
    return os.path.join(GOLDEN, name)


@pytest.mark.parametrize("name, message", [
    ("key_not_utf8", "node 1: key is not valid UTF-8"),
    ("key_surrogate", "node 1: key is not valid UTF-8"),
    ("type_name_not_utf8", "node 0: type name is not valid UTF-8"),
    ("metadata_key_not_utf8", "metadata entry 1: key is not valid UTF-8"),
    ("metadata_duplicate_key", 'metadata entry 1: duplicate key "step"'),
    ("segment_process_index", "segment of process 2 of 2"),
    ("big_int_empty", "big_int present but empty"),
    ("big_int_not_minimal", "not the minimal encoding"),
    ("big_int_extra_byte", "not the minimal encoding"),
    ("big_int_sign_extension", "not the minimal encoding"),
    ("big_int_with_int_value", "not the minimal encoding"),
    ("bool_inline_byte_2", "bool payload byte other than 0 or 1"),
    ("scalar_flag_on_1d", "scalar flag on a leaf that is not a 0-d array"),
])
def test_reader_refuses(name, message):
    p = golden(f"broken/{name}.jtree")
    for call in (jtree.load, jtree.load_pytreedef, jtree.open):
        with pytest.raises(jtree.CorruptionError, match=message) as e:
            call(p)
        assert f"{name}.jtree" in str(e.value)
    r = subprocess.run([CLI, "verify", p], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and message in r.stderr + r.stdout, r


def test_bool_chunk_bytes_are_refused_by_verify():
    p = golden("broken/bool_chunk_byte_ff.jtree")
    with jtree.open(p) as f:  # the header is fine; a load hands on the stored bytes
        rep = f.verify()
    assert not rep["ok"]
    assert "chunk 1: bool payload byte other than 0 or 1" in str(rep["problems"])
    r = subprocess.run([CLI, "verify", p], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "bool payload byte other than 0 or 1" in r.stdout + r.stderr


def test_save_refuses_keys_that_are_not_unicode_text(path):
    with pytest.raises(jtree.InvalidArgumentError, match="surrogates not allowed"):
        jtree.save({"a": {"b\udcff": 1}}, path)
    assert not os.path.exists(path)


def test_save_refuses_metadata_keys_that_are_not_unicode_text(path):
    # It was a bare TypeError from the binding.
    with pytest.raises(jtree.InvalidArgumentError, match="metadata key 'k\\\\udcff'"):
        jtree.save({"x": 1}, path, metadata={"k\udcff": b"1"})
    with pytest.raises(jtree.InvalidArgumentError, match="keys must be str"):
        jtree.save({"x": 1}, path, metadata={1: b"1"})
    assert not os.path.exists(path)


def test_metadata_values_come_back_as_saved_str_or_bytes(path):
    jtree.save({"x": 1}, path, metadata={"run": "héllo", "blob": b"\xff\x00", "empty": ""})
    with jtree.open(path) as f:
        assert f.metadata == {"run": "héllo", "blob": b"\xff\x00", "empty": ""}
        assert f.info()["min_read_version"] == 1  # (older readers read it: values as bytes)
    with pytest.raises(jtree.InvalidArgumentError, match="metadata 'v': the value is not valid "
                       "Unicode text"):
        jtree.save({"x": 1}, path + "2", metadata={"v": "\udcff"})
    assert not os.path.exists(path + "2")
    # A file written before format version 3 marks nothing: its values are bytes.
    golden = os.path.join(os.path.dirname(__file__), "..", "golden", "valid", "basic.jtree")
    with jtree.open(golden) as f:
        assert f.info()["writer_version"] < 3 and f.metadata["purpose"] == b"golden file"


def test_utf8_names_round_trip(path):
    P = collections.namedtuple("Pünkt", ["größe", "x"])
    tree = {"ключ": P(1, 2.5), "😀": [1], "1": "str key", 1: "int key"}
    jtree.save(tree, path, metadata={"€": b"euro"})
    out = jtree.load(path)
    assert list(out) == ["ключ", "😀", "1", 1]
    assert out["1"] == "str key" and out[1] == "int key"  # different keys
    assert out["ключ"].größe == 1 and out["ключ"].x == 2.5
    assert type(out["ключ"]).__name__ == "Pünkt"
    with jtree.open(path) as f:
        assert f.metadata == {"€": b"euro"}


class NotIdentifiers(tuple):
    """A tuple type that looks like a namedtuple to jtree, with fields Python's namedtuple
    would refuse (or rename to _0, _1)."""
    _fields = ("1", "class")


@pytest.mark.parametrize("fields, problem", [
    (("1", "class"), "'1' is not a Python identifier"),
    (("a", "class"), "'class' is not a Python identifier"),
    (("a", "_b"), "'_b' starts with an underscore"),
])
def test_save_refuses_namedtuple_fields_python_cannot_load(path, fields, problem):
    T = type("T", (NotIdentifiers,), {"_fields": fields})
    with pytest.raises(jtree.InvalidArgumentError, match=problem) as e:
        jtree.save({"nt": T((1, 2))}, path)
    assert e.value.key_path == "nt"
    assert not os.path.exists(path)


def test_load_refuses_namedtuple_fields_python_cannot_hold_never_renames():
    # The file (another writer's) has a NamedTuple with fields '_1' and 'class': valid for the
    # format. It loaded as ('_0', '_1'), with t._1 holding the file's 'class'.
    p = golden("valid/namedtuple_odd_fields.jtree")
    with pytest.raises(jtree.NotSupportedError, match="'_1' starts with an underscore"):
        jtree.load(p)
    with jtree.open(p) as f:  # the leaves stay reachable by their key paths
        assert list(f["class"][...]) == [0x01010101] * 4
    with pytest.raises(jtree.NotSupportedError, match="cannot rebuild it as a namedtuple"):
        jtree.load_pytreedef(p)


def test_present_but_empty_vectors_mean_absent():
    # FORMAT.md section 1: aux_data on a dict, shape/chunk_shape/inline_data/type_name on a
    # scalar, chunk_shape on an inline leaf, inline_data on a chunked leaf, all present and
    # empty; the empty Str key "" is a key (key_str's presence is what counts).
    p = golden("valid/empty_vectors.jtree")
    out = jtree.load(p)
    assert list(out) == ["", "a", "c"]
    assert out[""] == 1.5 and type(out[""]) is float
    assert out["a"].tolist() == [1, 2]
    assert out["c"].shape == (1000,)
    with jtree.open(p) as f:
        assert f.verify()["ok"]


def test_depth_is_counted_in_ancestors():
    # The deepest node at depth 512 (512 ancestors) is read; at 513 it is refused (6.1, 13).
    with jtree.open(golden("valid/depth_512.jtree")) as f:
        assert f.verify()["ok"]
    # A limit (FORMAT.md 12.1): the file may be valid, this reader will not go deeper.
    with pytest.raises(jtree.ResourceExhaustedError, match="nesting deeper than 512"):
        jtree.open(golden("broken/depth_513.jtree"))
