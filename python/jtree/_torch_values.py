"""PyTorch values jtree knows without a registration: the non-array values of torch
checkpoints (``torch.Size``, ``torch.dtype``) saved without pickle. (``device=`` for loads is
jtree._placement's.)

Nothing here imports torch unless the caller's objects or options are torch's: saving a
``torch.Size`` means torch is loaded already, and loading one back as a ``torch.Size`` is
asked for by ``framework="torch"`` (other frameworks get the plain Python value, so a file
written from torch loads in a process without it).

In the file: a ``torch.Size`` is a custom node named ``torch.Size`` whose children are its
ints (no aux data); a ``torch.dtype`` is a custom leaf named ``torch.dtype`` whose bytes are
the dtype's name in torch (``"bfloat16"``, UTF-8); a ``torch.device`` a custom leaf named
``torch.device`` whose bytes are ``str(device)`` (``"cuda:0"``, UTF-8).
"""
from __future__ import annotations

import sys
from typing import Any, List, Optional, Tuple

from ._errors import NotSupportedError

SIZE = "torch.Size"
DTYPE = "torch.dtype"
DEVICE = "torch.device"
NODES = frozenset({SIZE})
LEAVES = frozenset({DTYPE, DEVICE})


# ---- saving ----------------------------------------------------------------------------------

def saved_form(x: Any) -> Optional[Tuple[str, str, Any]]:
    """How a torch value with no array and no registration is saved: ("node", name, children)
    or ("leaf", name, bytes); None when ``x`` is no such value (or torch is not loaded)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if type(x) is torch.Size:
        return "node", SIZE, [int(d) for d in x]
    if isinstance(x, torch.dtype):
        return "leaf", DTYPE, str(x).split(".", 1)[-1].encode("utf-8")
    if isinstance(x, torch.device):
        return "leaf", DEVICE, str(x).encode("utf-8")
    return None


# ---- loading ---------------------------------------------------------------------------------

def build_node(name: str, children: List[Any], framework: str, file: Optional[str],
               key_path: str) -> Any:
    """A ``torch.Size`` node: a torch.Size for ``framework="torch"``, else a tuple."""
    if framework == "torch":
        import torch  # noqa: PLC0415

        # (torch.Size takes any int, and fails only when it is printed or used.)
        if not all(type(c) is int and -(1 << 63) <= c < (1 << 63) for c in children):
            from ._errors import CorruptionError, error  # noqa: PLC0415

            raise error(CorruptionError, file, key_path,
                        "a torch.Size node whose children are not all int64 values")
        return torch.Size(children)
    return tuple(children)


def build_leaf(name: str, data: bytes, framework: str, file: Optional[str],
               key_path: str) -> Any:
    """A ``torch.dtype`` or ``torch.device`` leaf: the torch object for ``framework="torch"``,
    else its name (``"bfloat16"``, ``"cuda:0"``). A device this process lacks is still made
    (torch.device names any device), as torch.load does with map_location unset."""
    from ._errors import CorruptionError, error  # noqa: PLC0415

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(CorruptionError, file, key_path, "a torch.dtype leaf that is not UTF-8")
    if framework != "torch":
        return text
    import torch  # noqa: PLC0415

    if name == DEVICE:
        try:
            return torch.device(text)
        except (RuntimeError, TypeError, ValueError) as e:
            raise error(CorruptionError, file, key_path,
                        f"the file holds torch.device {text!r}, which is no device: {e}") from None
    value = getattr(torch, text, None) if text.isidentifier() else None
    if not isinstance(value, torch.dtype):
        raise error(NotSupportedError, file, key_path,
                    f"the file holds torch.dtype {text!r}, which this torch "
                    f"({torch.__version__}) does not have")
    return value
