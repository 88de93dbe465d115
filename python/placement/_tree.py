"""Pytrees: flatten a nested structure into leaves with key paths, and
rebuild it.

With JAX installed this is jax.tree_util (so every registered node type --
flax structs, optax states, custom classes -- works); without JAX a small
equivalent handles dict (keys sorted, as JAX does), OrderedDict, list,
tuple, namedtuple and None (an empty node, as in JAX). Anything else is a
leaf. Key paths are JAX's keystr: "['images']", "[0]", ".field".
"""
from __future__ import annotations

import collections
from typing import Any, Callable, List, Optional, Sequence, Tuple

try:
    import jax.tree_util as _jtu
except ImportError:  # JAX is optional
    _jtu = None


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


class _Def:
    """A treedef of the pure-Python implementation."""

    __slots__ = ("kind", "meta", "children")

    def __init__(self, kind: str, meta: Any = None, children: Sequence["_Def"] = ()) -> None:
        self.kind = kind
        self.meta = meta
        self.children = list(children)

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, _Def) and self.kind == other.kind
                and self.meta == other.meta and self.children == other.children)

    def __repr__(self) -> str:
        return f"PyTreeDef({self.kind}, {self.meta!r}, {self.children!r})"


def _flatten_py(tree: Any, is_leaf: Optional[Callable[[Any], bool]], path: str,
                leaves: List[Any], keys: List[str]) -> _Def:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        keys.append(path)
        return _Def("leaf")
    if tree is None:
        return _Def("none")
    if isinstance(tree, collections.OrderedDict):
        names = list(tree.keys())
        return _Def("odict", names, [_flatten_py(tree[k], is_leaf, f"{path}[{k!r}]", leaves, keys)
                                     for k in names])
    if isinstance(tree, dict):
        names = sorted(tree.keys())
        return _Def("dict", names, [_flatten_py(tree[k], is_leaf, f"{path}[{k!r}]", leaves, keys)
                                    for k in names])
    if _is_namedtuple(tree):
        return _Def("namedtuple", type(tree),
                    [_flatten_py(getattr(tree, f), is_leaf, f"{path}.{f}", leaves, keys)
                     for f in tree._fields])
    if isinstance(tree, (list, tuple)):
        return _Def(type(tree).__name__, None,
                    [_flatten_py(v, is_leaf, f"{path}[{i}]", leaves, keys)
                     for i, v in enumerate(tree)])
    leaves.append(tree)
    keys.append(path)
    return _Def("leaf")


def _unflatten_py(treedef: _Def, leaves: Any) -> Any:
    kind = treedef.kind
    if kind == "leaf":
        return next(leaves)
    if kind == "none":
        return None
    children = [_unflatten_py(c, leaves) for c in treedef.children]
    if kind == "dict":
        return dict(zip(treedef.meta, children))
    if kind == "odict":
        return collections.OrderedDict(zip(treedef.meta, children))
    if kind == "namedtuple":
        return treedef.meta(*children)
    if kind == "list":
        return children
    return tuple(children)


def flatten(tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None
            ) -> Tuple[List[Any], Any, List[str]]:
    """(leaves, treedef, key paths) of `tree`, leaves in JAX's order."""
    if _jtu is not None:
        with_path, treedef = _jtu.tree_flatten_with_path(tree, is_leaf=is_leaf)
        keys = [_jtu.keystr(p) for p, _ in with_path]
        return [leaf for _, leaf in with_path], treedef, keys
    leaves: List[Any] = []
    keys: List[str] = []
    treedef = _flatten_py(tree, is_leaf, "", leaves, keys)
    return leaves, treedef, keys


def unflatten(treedef: Any, leaves: Sequence[Any]) -> Any:
    if _jtu is not None and not isinstance(treedef, _Def):
        return _jtu.tree_unflatten(treedef, leaves)
    return _unflatten_py(treedef, iter(leaves))


def tree_map(fn: Callable[[Any], Any], tree: Any,
             is_leaf: Optional[Callable[[Any], bool]] = None) -> Any:
    leaves, treedef, _ = flatten(tree, is_leaf)
    return unflatten(treedef, [fn(x) for x in leaves])


def upload_keys(keys: Sequence[str]) -> List[str]:
    """Key paths as batch keys: unique and non-empty (a bare leaf is
    "value")."""
    return [k if k else "value" for k in keys]
