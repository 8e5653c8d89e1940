"""jtree.convert: bring foreign checkpoints in as .jtree files and take them out again.

    import jtree
    jtree.convert("model.safetensors", "model.jtree")
    jtree.convert("model.safetensors.index.json", "model.jtree", compression=None)
    jtree.convert("model.jtree", "model.safetensors")

``python -m jtree.convert SRC DST`` and ``jtree convert SRC DST`` run the same code.
Readers live in ``_from_<fmt>.py``, writers in ``_to_<fmt>.py``; ``_registry`` lists them.

This package is callable: ``jtree.convert(src, dst, ...)`` is ``jtree.convert.convert(...)``
(see its docstring for the options). A module, not a function of the same name shadowing it,
so that ``import jtree.convert.<module>`` and ``python -m jtree.convert`` keep working.
"""
import sys
import types

from ._driver import ConvertStats, convert
from ._source import Source

__all__ = ["convert", "ConvertStats", "Source"]


class _CallableModule(types.ModuleType):
    """The package's class: calling it calls :func:`convert`, which is its ``__call__``
    itself; ``__signature__`` gives convert's real parameters to ``inspect.signature`` (and
    so to help() and editors), which would otherwise drop ``src`` as a method's ``self``."""

    __call__ = staticmethod(convert)

    @property
    def __signature__(self):  # noqa: ANN204  (inspect imported only when it is asked for)
        import inspect  # noqa: PLC0415

        return inspect.signature(convert)


sys.modules[__name__].__class__ = _CallableModule
