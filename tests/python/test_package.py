"""The installed package: docstrings and type stubs for every public name, py.typed, the
native module's stub generated from the module."""
import ast
import inspect
import pathlib

import jtree


def test_every_public_name_has_a_docstring():
    missing = [n for n in jtree.__all__ if not inspect.getdoc(getattr(jtree, n))]
    assert not missing, missing
    for cls in (jtree.File, jtree.Node, jtree.LazyArray, jtree.Future):
        for name, member in vars(cls).items():
            if name.startswith("_") or not callable(member) and not isinstance(member, property):
                continue
            assert inspect.getdoc(member), f"{cls.__name__}.{name}"


def test_the_stub_declares_every_public_name_with_the_same_parameters():
    pkg = pathlib.Path(jtree.__file__).parent
    tree = ast.parse((pkg / "__init__.pyi").read_text())
    declared = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.setdefault(node.name, node)
    assert sorted(set(jtree.__all__) - set(declared)) == []
    for name in jtree.__all__:
        obj = getattr(jtree, name)
        node = declared[name]
        if inspect.isfunction(obj) and isinstance(node, ast.FunctionDef):
            a = node.args
            stub_params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
            real = [p for p in inspect.signature(obj).parameters.values()
                    if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
            real_names = [p.name for p in real]
            if name in ("nonblocking_save", "nonblocking_load"):  # **options spelled out
                assert set(real_names) <= set(stub_params), name
            else:
                assert stub_params == real_names, (name, stub_params, real_names)
    assert (pkg / "py.typed").exists()


def test_native_module_stub_is_installed_and_current():
    pkg = pathlib.Path(jtree._jtree.__file__).parent
    stub = (pkg / "_jtree.pyi").read_text()
    for name in ("class Builder", "class Reader", "def write(", "def compact(", "def dtypes("):
        assert name in stub
    for name in ("Builder", "Reader", "write", "compact", "dtypes", "dlpack_info", "version"):
        assert hasattr(jtree._jtree, name)
