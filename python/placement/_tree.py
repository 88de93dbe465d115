"""Pytrees: flatten a nested structure into leaves with key paths, and
rebuild it.

Once the program has imported JAX this is jax.tree_util (so every
registered node type -- flax structs, optax states, custom classes -- works);
before that, or without JAX, a small
equivalent handles dict (keys sorted, as JAX does), OrderedDict, list,
tuple, namedtuple and None (an empty node, as in JAX). Anything else is a
leaf. Key paths name each leaf: its path's parts joined by "/" ("images",
"layers/0/w", "state/count"); a bare leaf is "value". Should two paths join
to the same text, JAX's keystr ("['a/b']") is used instead for all.
"""
from __future__ import annotations

import collections
import sys
from typing import Any, Callable, List, Optional, Sequence, Tuple



def _jax_tree_util() -> Any:
    """jax.tree_util once the program imported JAX (data holding JAX-registered
    nodes can only exist then); None otherwise, so importing placement never
    pays for importing JAX."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        import jax.tree_util as jtu
    except ImportError:
        return None
    return jtu


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


def _flatten_py(tree: Any, is_leaf: Optional[Callable[[Any], bool]], path: Tuple[Any, ...],
                leaves: List[Any], keys: List[Tuple[Any, ...]]) -> _Def:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        keys.append(path)
        return _Def("leaf")
    if tree is None:
        return _Def("none")
    if isinstance(tree, collections.OrderedDict):
        names = list(tree.keys())
        return _Def("odict", names, [_flatten_py(tree[k], is_leaf, path + (k,), leaves, keys)
                                     for k in names])
    if isinstance(tree, dict):
        names = sorted(tree.keys())
        return _Def("dict", names, [_flatten_py(tree[k], is_leaf, path + (k,), leaves, keys)
                                    for k in names])
    if _is_namedtuple(tree):
        return _Def("namedtuple", type(tree),
                    [_flatten_py(getattr(tree, f), is_leaf, path + (f,), leaves, keys)
                     for f in tree._fields])
    if isinstance(tree, (list, tuple)):
        return _Def(type(tree).__name__, None,
                    [_flatten_py(v, is_leaf, path + (i,), leaves, keys)
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


def _part(entry: Any) -> Any:
    """The plain value of a jax.tree_util path entry (DictKey, SequenceKey,
    GetAttrKey, FlattenedIndexKey)."""
    for attr in ("key", "idx", "name"):
        if hasattr(entry, attr):
            return getattr(entry, attr)
    return entry


def _keystr(path: Tuple[Any, ...]) -> str:
    return "".join(f"[{p!r}]" for p in path)


def _names(paths: List[Tuple[Any, ...]]) -> List[str]:
    names = ["/".join(str(p) for p in path) or "value" for path in paths]
    if len(set(names)) != len(names):
        names = [_keystr(path) or "value" for path in paths]
    return names


def flatten(tree: Any, is_leaf: Optional[Callable[[Any], bool]] = None
            ) -> Tuple[List[Any], Any, List[str]]:
    """(leaves, treedef, leaf names) of `tree`, leaves in JAX's order."""
    jtu = _jax_tree_util()
    if jtu is not None:
        with_path, treedef = jtu.tree_flatten_with_path(tree, is_leaf=is_leaf)
        jax_paths = [tuple(_part(e) for e in p) for p, _ in with_path]
        return [leaf for _, leaf in with_path], treedef, _names(jax_paths)
    leaves: List[Any] = []
    paths: List[Tuple[Any, ...]] = []
    py_treedef = _flatten_py(tree, is_leaf, (), leaves, paths)
    return leaves, py_treedef, _names(paths)


def unflatten(treedef: Any, leaves: Sequence[Any]) -> Any:
    if not isinstance(treedef, _Def):
        return _jax_tree_util().tree_unflatten(treedef, leaves)
    return _unflatten_py(treedef, iter(leaves))


def tree_map(fn: Callable[[Any], Any], tree: Any,
             is_leaf: Optional[Callable[[Any], bool]] = None) -> Any:
    leaves, treedef, _ = flatten(tree, is_leaf)
    return unflatten(treedef, [fn(x) for x in leaves])

