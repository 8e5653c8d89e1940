"""The modules of python/jtree/ import each other without a cycle (issue 21 item 4).

A cycle (module A imports B, which imports A, often hidden in a function body to dodge the
import-time error) means neither module can be read, tested or changed without the other:
the import graph must be a DAG. Imports are read with ``ast`` from the source, function-level
ones included, so this needs neither the native module nor any framework.
"""
import ast
import os

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "python", "jtree")


def _modules():
    return sorted(f[:-3] for f in os.listdir(PKG) if f.endswith(".py"))


def _imports(name, modules):
    """The package modules that module ``name`` imports, anywhere in its source."""
    with open(os.path.join(PKG, name + ".py"), encoding="utf-8") as fh:
        return _imports_in(fh.read(), name, modules)


def _imports_in(source, name, modules):
    tree = ast.parse(source, filename=name + ".py")
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .X import ... / from . import X
                base = node.module.split(".")[0] if node.module else None
                targets = [base] if base else [a.name.split(".")[0] for a in node.names]
            elif node.level == 0 and (node.module or "").startswith("jtree."):
                targets = [node.module.split(".")[1]]
            elif node.level == 0 and node.module == "jtree":
                targets = [a.name for a in node.names]
            else:
                continue
        elif isinstance(node, ast.Import):
            targets = [a.name.split(".")[1] for a in node.names if a.name.startswith("jtree.")]
        else:
            continue
        out.update(t for t in targets if t in modules and t != name)
    return out


def _graph():
    modules = set(_modules())
    return {m: _imports(m, modules) for m in sorted(modules)}


def _cycle(graph):
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state = {}  # 1: on the current path, 2: done
    stack = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in graph:
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_checker_finds_a_cycle():
    # The checker itself: a graph with a cycle is reported, a DAG is not.
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_parser_sees_function_level_imports():
    src = ("import numpy as np\nfrom . import _jtree, _keypath as kp\n"
           "def f():\n    from ._api import load\n    import jtree._save\n"
           "class C:\n    def g(self):\n        from ._file import File\n")
    modules = {"_api", "_file", "_keypath", "_save", "_load"}
    assert _imports_in(src, "_load", modules) == {"_api", "_file", "_keypath", "_save"}


def test_python_jtree_imports_form_a_dag():
    graph = _graph()
    assert "_api" in graph and "_file" in graph and "_load" in graph  # (the package was found)
    assert graph["_api"], "no imports parsed: the checker reads nothing"
    cycle = _cycle(graph)
    assert cycle is None, f"import cycle among python/jtree/*.py: {' -> '.join(cycle)}"
