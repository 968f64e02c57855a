"""Where an exported graph node came from: its module path and source line, for messages that name a node."""

from __future__ import annotations

import re

from torch.fx import Node

from .binding import aten_overload

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def module_path(node: Node) -> str | None:
    """The innermost module (``'layer1.0.conv' (torch.nn.modules.conv.Conv2d)``) from ``nn_module_stack``."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    try:
        path, kind = list(stack.values())[-1]
    except (TypeError, ValueError):
        return None
    kind_name = kind if isinstance(kind, str) else getattr(kind, "__qualname__", str(kind))
    return f"'{path}' ({kind_name})" if path else f"the root module ({kind_name})"


def source_line(node: Node) -> str | None:
    """``file:line in fn: code`` of the user frame that created the node (the last frame outside torch)."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    lines = trace.rstrip().splitlines()
    frames: list[tuple[str, str, str, str]] = []
    for i, line in enumerate(lines):
        m = _FRAME.search(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.search(lines[i + 1]) else ""
            frames.append((m.group(1), m.group(2), m.group(3), code))
    if not frames:
        return lines[-1].strip() or None
    user = [f for f in frames if "/torch/" not in f[0] and "/site-packages/" not in f[0]]
    path, lineno, fn, code = (user or frames)[-1]
    return f"{path}:{lineno} in {fn}" + (f": {code}" if code else "")


def describe_node(node: Node) -> str:
    """``node 'conv2d' (aten.convolution.default) from module 'a.b' (...) at file:line in fn: code``."""
    text = f"node '{node.name}' ({aten_overload(node.target)})"
    mod = module_path(node)
    if mod:
        text += f" from module {mod}"
    src = source_line(node)
    if src:
        text += f" at {src}"
    return text
