"""jtree.convert: bring foreign checkpoints in as .jtree files and take them out again.

    import jtree
    jtree.convert("model.safetensors", "model.jtree")
    jtree.convert("model.safetensors.index.json", "model.jtree", compression=None)
    jtree.convert("model.jtree", "model.safetensors")

``python -m jtree.convert SRC DST`` and ``jtree convert SRC DST`` run the same code.
Readers live in ``_from_<fmt>.py``, writers in ``_to_<fmt>.py``; ``_registry`` lists them.
(``jtree.convert`` the attribute is the function; this package is ``jtree.convert`` in
``sys.modules`` and for ``python -m``.)
"""
from ._driver import ConvertStats, convert
from ._source import Source

__all__ = ["convert", "ConvertStats", "Source"]
