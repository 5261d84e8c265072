"""netCDF files of the toolkit: one writer and one reader for every labelled file a run writes (an
experiment's ``results.nc``, a sweep point's checkpoint, the ArviZ draws of ``draws/``).

A file holds an ``xarray.DataTree`` (a Dataset, or a mapping of group paths to Datasets such as
``{"/": results, "/compare": results of a second sampler}``), written with h5netcdf, numeric variables
compressed (zlib level 4), atomically: to a temporary name beside the target, then renamed, so a
file that exists is complete.  :func:`to_tree` and :func:`from_tree` turn a mapping of arrays and plain
values (a sweep point's result) into such a tree and back.
"""
from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = ["as_tree", "from_tree", "read_tree", "to_tree", "write_tree"]


def as_tree(data):
    """A DataTree from a DataTree, a Dataset (the root group) or {group path: Dataset}."""
    import xarray as xr

    if isinstance(data, xr.DataTree):
        return data
    if isinstance(data, xr.Dataset):
        return xr.DataTree(data)
    return xr.DataTree.from_dict(dict(data))


def write_tree(data, path) -> Path:
    """Write ``data`` (:func:`as_tree`) to ``path`` as netCDF, atomically; returns the path."""
    path = Path(path)
    tree = as_tree(data)
    encoding = {node.path: {name: {"zlib": True, "complevel": 4} for name, v in node.dataset.data_vars.items()
                            if v.dtype.kind in "biuf" and v.ndim > 0}
                for node in tree.subtree}
    tmp = path.with_name(f"{path.name}.tmp-{socket.gethostname()}-{os.getpid()}")     # not NAME*.nc until done
    try:
        tree.to_netcdf(tmp, engine="h5netcdf", encoding=encoding)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_tree(path):
    """The DataTree of a file :func:`write_tree` wrote, read into memory (the file is closed)."""
    import xarray as xr

    with xr.open_datatree(path, engine="h5netcdf") as tree:
        return tree.load()


# ----------------------------------------------------------------------------------------
# a mapping of arrays and plain values (a sweep point's result) as a DataTree, and back

LIST = "__list__"           # a group that stands for a list: its children are the items "0", "1", ...


def _is_array(v) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype") and np.ndim(v) > 0


def _holds_arrays(v) -> bool:
    if isinstance(v, Mapping):
        return any(_is_array(x) or _holds_arrays(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(_is_array(x) or _holds_arrays(x) for x in v)
    return False


def _plain(v):
    """numpy / JAX scalars as Python numbers, recursively (for a JSON attribute)."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "item") and np.ndim(v) == 0:
        return v.item()
    return v


def to_tree(result: Mapping, dims: Mapping[str, tuple] | None = None, _prefix: str = ""):
    """A DataTree of ``result``: its arrays become variables (the dimensions of its top-level arrays named
    by ``dims`` {name: dims}, the others ``GROUP.NAME_0, GROUP.NAME_1, ...``, unique in the file), a
    mapping or list holding arrays a group (a list's items the groups "0", "1", ...), every other value
    (numbers, strings, None, lists and tables of them) an attribute holding its JSON text; a "/" in a key
    is written %2F (it separates groups).  :func:`from_tree` gives ``result`` back, arrays as numpy arrays."""
    import xarray as xr

    dims = dims or {}
    variables, attrs, children = {}, {}, {}
    items = result.items() if isinstance(result, Mapping) else ((str(i), v) for i, v in enumerate(result))
    for name, v in items:
        name = _escape(str(name))
        if _is_array(v):
            a = np.asarray(v)
            variables[name] = (dims.get(name) or tuple(f"{_prefix}{name}_{i}" for i in range(a.ndim)), a)
        elif _holds_arrays(v):
            children[name] = to_tree(v, None, f"{_prefix}{name}.")
        else:
            attrs[name] = json.dumps(_plain(v))
    if not isinstance(result, Mapping):
        attrs[LIST] = json.dumps(len(attrs) + len(variables) + len(children))
    return xr.DataTree(xr.Dataset(variables, attrs=attrs), children=children)


def _escape(name: str) -> str:
    """A key as a netCDF / DataTree name: "/" separates groups, so it is written %2F (and % as %25)."""
    return name.replace("%", "%25").replace("/", "%2F")


def _unescape(name: str) -> str:
    return name.replace("%2F", "/").replace("%25", "%")


def from_tree(tree):
    """The mapping (or list) :func:`to_tree` encoded."""
    ds = tree.dataset
    out = {_unescape(name): json.loads(v) for name, v in ds.attrs.items() if name != LIST}
    out.update({_unescape(name): ds[name].values for name in ds.data_vars})
    out.update({_unescape(name): from_tree(child) for name, child in tree.children.items()})
    if LIST in ds.attrs:
        return [out[str(i)] for i in range(json.loads(ds.attrs[LIST]))]
    return out
