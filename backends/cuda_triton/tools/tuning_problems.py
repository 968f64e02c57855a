"""The convolutions scripts/tune.py measures, from the sources ``--problems`` names.

* ``public``: bench/public_suite.py, its own batch sizes and layouts, in every ``dtypes``;
* ``models`` / ``model:NAME``: the layers of `tuning_signatures` (all networks or one), in ``model_dtypes`` x
  ``batches`` x ``layouts``;
* ``zoo:NAME``: a `cuda_triton.models.zoo` model's convolutions as torch.export records them (no executorch);
* ``json:PATH``: a JSON list of signature strings (expanded over ``dtypes`` x ``layouts``), of objects with a
  "signature" and optional "dtype"/"layout", or of problem specs; or a tuning table, or a tuning log (.jsonl);
* ``set:NAME``: a named set of bench/tuning_layer_sets.txt, each convolution in its own dtype and layout.

Every problem comes with its source's name, which the tuning log records. Depends on torch and cuda_triton.conv
only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .suites import PUBLIC_SUITE, layer_set, load_suite
from .tuning_networks import Layer
from .tuning_signatures import layer_problem, parse_dtype, problems


def public_problems(dtypes: list[str], bias: bool) -> list[tuple[str, Any]]:
    """The public suite in every dtype (no bias unless ``bias``), each case in its own batch and layout."""
    out = []
    for dt in dtypes:
        dtype, tf32 = parse_dtype(dt)
        for case in load_suite(PUBLIC_SUITE):
            layer = Layer(
                f"public:{case.name}",
                case.C,
                tuple(case.spatial),
                case.K,
                tuple(case.kernel),
                tuple(case.stride),
                tuple(case.pad_before),
                tuple(case.pad_after),
                tuple(case.dilation),
                case.groups,
                case.transposed,
                tuple(case.output_padding) if case.transposed else (),
                bias,
            )
            layout = "channels_last" if case.channels_last else "contiguous"
            out.append((layer.net, layer_problem(layer, case.N, dtype, layout, tf32)))
    return out


def model_problems(
    names: list[str] | None, dtypes: list[str], batches: list[int], layouts: list[str]
) -> list[tuple[str, Any]]:
    """The layers of the named networks (None: all), deduplicated, over dtypes x batches x layouts."""
    return [(f"model:{net}", p) for net, p in problems(names, batches, dtypes, layouts)]


def zoo_problems(name: str, dtypes: list[str], batches: list[int]) -> list[tuple[str, Any]]:
    """The convolutions of a zoo model as torch.export records them (no executorch involved)."""
    from cuda_triton.conv.binding import bind_conv, is_conv_node
    from cuda_triton.conv.problem import ConvProblem
    from cuda_triton.models import torchvision_models, zoo

    if name.startswith(torchvision_models.PREFIX):
        base_shape = torchvision_models.INPUT_SHAPE
    elif name in zoo.ZOO:
        base_shape = zoo.ZOO[name].input_shape
    else:
        raise SystemExit(f"zoo:{name}: unknown model; a zoo name ({', '.join(sorted(zoo.ZOO))}) or tv:<name>")
    out = []
    for dt in dtypes:
        dtype, tf32 = parse_dtype(dt)
        for batch in batches:
            shape = (batch, *base_shape[1:])
            model, example = zoo.build(name, getattr(torch, dtype), shape)
            ep = torch.export.export(model, example)
            for node in ep.graph.nodes:
                if node.op != "call_function" or not is_conv_node(node):
                    continue
                args = bind_conv(node)
                x, w = args.input.meta["val"], args.weight.meta["val"]
                p = ConvProblem.from_shapes(
                    tuple(x.shape), tuple(x.stride()), tuple(w.shape), tuple(w.stride()),
                    args.bias is not None, args.params, dtype, tf32,
                )  # fmt: skip
                out.append((f"zoo:{name}", p))
    return out


def json_problems(path: str, dtypes: list[str], layouts: list[str]) -> list[tuple[str, Any]]:
    """Problems from a JSON list (or a table's entries, or a .jsonl log). Items may be:

    * a signature string (``ConvProblem.signature()``): every --dtypes x --layouts (dense tensors);
    * an object with "signature" and optional "dtype" (fp16/bf16/fp32/fp32-ieee) and "layout";
    * a problem spec (what tables and logs store), or an object holding one under "problem".
    """
    from cuda_triton.conv.tuning_keys import problem_from_signature, problem_from_spec

    text = Path(path).read_text()
    if path.endswith(".jsonl"):
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        data = json.loads(text)
        items = data["entries"] if isinstance(data, dict) else data
    name = f"json:{Path(path).name}"
    out = []
    for item in items:
        if isinstance(item, str) or (
            isinstance(item, dict) and "signature" in item and "problem" not in item
        ):
            sig = item if isinstance(item, str) else item["signature"]
            dts = [item["dtype"]] if isinstance(item, dict) and "dtype" in item else dtypes
            lays = [item["layout"]] if isinstance(item, dict) and "layout" in item else layouts
            seen = set()
            for dt in dts:
                dtype, tf32 = parse_dtype(dt)
                for lay in lays:
                    p = problem_from_signature(sig, dtype, lay, tf32)
                    if p not in seen:
                        seen.add(p)
                        out.append((name, p))
        else:
            out.append((name, problem_from_spec(item.get("problem", item))))
    return out


def set_problems(name: str) -> list[tuple[str, Any]]:
    """A named set of bench/tuning_layer_sets.txt: each convolution in its own dtype and layout."""
    from cuda_triton.conv.tuning_keys import problem_from_signature

    out = []
    for item in layer_set(name):
        dtype, tf32 = parse_dtype(item["dtype"])
        out.append((f"set:{name}", problem_from_signature(item["signature"], dtype, item["layout"], tf32)))
    return out


def collect_problems(
    sources: str,
    dtypes: list[str],
    model_dtypes: list[str],
    batches: list[int],
    layouts: list[str],
    bias: bool = False,
) -> list[tuple[str, Any]]:
    """(source, problem) for every comma-separated source, in order (a problem may come from several)."""
    found: list[tuple[str, Any]] = []
    for source in [s.strip() for s in sources.split(",") if s.strip()]:
        if source == "public":
            found += public_problems(dtypes, bias)
        elif source == "models":
            found += model_problems(None, model_dtypes, batches, layouts)
        elif source.startswith("model:"):
            found += model_problems([source[6:]], model_dtypes, batches, layouts)
        elif source.startswith("zoo:"):
            found += zoo_problems(source[4:], model_dtypes, batches)
        elif source.startswith("json:"):
            found += json_problems(source[5:], dtypes, layouts)
        elif source.startswith("set:"):
            found += set_problems(source[4:])
        else:
            raise SystemExit(
                f"unknown problem source {source!r} (public, models, model:NAME, zoo:NAME, json:PATH, set:NAME)"
            )
    return found
