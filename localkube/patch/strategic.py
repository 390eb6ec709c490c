"""Strategic merge patch, as k8s.io/apimachinery/pkg/util/strategicpatch `StrategicMergeMapPatch` implements it,
with the per-type Go struct tags replaced by the field-name tables `MERGE_KEYS` and `PRIMITIVE_MERGE_LISTS`.
Element order follows the server's algorithm, down to the Go slice aliasing it depends on."""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import _GENERIC_422, PatchError, _go_eq, _go_s, _go_type, _go_v, _internal, _json_kind

# Lists merged element-by-element (patchStrategy=merge) and the key that identifies an element, by field
# name wherever it occurs. One exception is made because the name is ambiguous: "ports" is keyed by
# containerPort only directly under a container, by "port" for a Service's spec.ports, and is an atomic
# list elsewhere (NetworkPolicy, Endpoints ...), as in the real API types.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "webhooks": "name",
}

# Lists of scalars with patchStrategy=merge: merged as ordered sets.
PRIMITIVE_MERGE_LISTS: frozenset[str] = frozenset({"finalizers"})



@dataclass(frozen=True)
class PatchMeta:
    """The patch strategy of each list field: what the typed API's struct tags say upstream (strategicpatch's
    LookupPatchMeta), given here by field name."""

    merge_keys: Mapping[str, str]
    primitive_lists: Collection[str]


_CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})

# ---------------------------------------------------------------------------------------------------
# Strategic merge patch, as k8s.io/apimachinery/pkg/util/strategicpatch (mergeMap and friends).

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER = "$setElementOrder"

_ERR_PRIMITIVE_LIST = "invalid patch format of primitive list"
_ERR_RETAIN_KEYS = "invalid patch format of retainKeys"
_ERR_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
_ERR_LIST_OF_LISTS = "lists of lists are not supported"


def _no_merge_key(m: dict[str, Any], key: str) -> PatchError:
    return _internal(f"map: {_go_v(m)} does not contain declared merge key: {key}")


def _bad_arg_type(expected: str, actual: Any) -> PatchError:
    return _internal(f"expected a {expected}, but received a {_go_type(actual)}")


_MAP_T = "map[string]interface {}"
_SLICE_T = "[]interface {}"


def _patch_meta(meta: PatchMeta, parents: tuple[str, ...], field: str) -> tuple[str, str]:
    """(patchStrategy, patchMergeKey) of `field` in the map reached through `parents` (field names)."""
    if field == "ports":
        if parents and parents[-1] in _CONTAINER_LISTS:
            return "merge", "containerPort"
        if parents == ("spec",):
            return "merge", "port"
        return "", ""
    if field in meta.merge_keys:
        return "merge", meta.merge_keys[field]
    if field in meta.primitive_lists:
        return "merge", ""
    return "", ""


def _is_directive_key(key: str) -> bool:
    return (
        key in (_DIRECTIVE, _RETAIN_KEYS)
        or key.startswith(_SET_ELEMENT_ORDER)
        or key.startswith(_DELETE_FROM_PRIMITIVE_LIST)
    )


def _verbatim(value: Any) -> Any:
    """A patch value stored without merging, as it reads back from the real server.

    The real server stores such values as they are and then decodes the result into the typed object,
    which drops what no struct field holds: directive keys and null members. localkube keeps untyped
    objects, so it drops them here.
    """
    if isinstance(value, dict):
        return {k: _verbatim(v) for k, v in value.items() if v is not None and not _is_directive_key(k)}
    if isinstance(value, list):
        return [_verbatim(v) for v in value]
    return value


def _remove_directives(value: Any) -> tuple[bool, Any]:
    """removeDirectives: drop every map holding a `$patch` (the value itself, if it is one)."""
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return False, None
        kept: dict[str, Any] = {}
        for k, v in value.items():
            keep, v = _remove_directives(v)
            if keep:
                kept[k] = v
        return True, kept
    if isinstance(value, list):
        items: list[Any] = []
        for v in value:
            keep, v = _remove_directives(v)
            if keep:
                items.append(v)
        return True, items
    return True, value


def _store_unmerged(original: dict[str, Any], key: str, value: Any) -> None:
    """A patch value for a key the original lacks, or holds with another type: nulls are discarded
    first (discardNullValuesFromPatch), then maps carrying `$patch` are dropped (removeDirectives)."""
    keep, value = _remove_directives(_drop_nulls(value))
    if keep:
        original[key] = _verbatim(value)
    else:
        original.pop(key, None)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _slice_kind(*slices: list[Any]) -> str:
    """sliceElementType: the one element kind shared by every element of `slices`."""
    prev: str | None = None
    for s in slices:
        for v in s:
            current = _go_type(v)
            if prev is None:
                if v is None:
                    raise _internal("runtime error: invalid memory address or nil pointer dereference")
                prev = current
                if isinstance(v, list):
                    raise PatchError(_ERR_LIST_OF_LISTS, 422, status_message=_GENERIC_422)
            elif prev != current:
                raise _internal(f"list element types are not identical: {_go_v(list(slices))}")
    if prev is None:
        raise _internal("no elements in any of the given slices")
    return "map" if prev == _MAP_T else prev


def _extract_key(key: str, prefix: str) -> str:
    parts = key.split("/", 1)
    if len(parts) <= 1 or parts[0] != prefix:
        if prefix == _DELETE_FROM_PRIMITIVE_LIST:
            raise PatchError(_ERR_PRIMITIVE_LIST, 400)
        raise PatchError(_ERR_SET_ELEMENT_ORDER, 400)
    return parts[1]


def _find_map(items: list[Any], key: str, value: Any) -> int | None:
    """findMapInSliceBasedOnKeyValue: index of the first map whose `key` equals `value`."""
    for i, v in enumerate(items):
        if not isinstance(v, dict):
            raise _internal(f"value for key {i} is not a map.")
        if key in v and _go_eq(v[key], value):
            return i
    return None


def _index(items: list[Any], value: Any, merge_key: str, kind: str) -> int:
    def val(item: Any) -> Any:
        if kind != "map":
            return item
        return item.get(merge_key) if isinstance(item, dict) else None

    wanted = val(value)
    for i, v in enumerate(items):
        if _go_eq(wanted, val(v)):
            return i
    return -1


def _validate_merge_key_in_lists(merge_key: str, *lists: list[Any]) -> None:
    for items in lists:
        for item in items:
            if not isinstance(item, dict):
                raise _bad_arg_type(_MAP_T, item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)


def _extract_to_delete_items(items: list[Any]) -> tuple[list[Any], list[Any]]:
    keep: list[Any] = []
    delete: list[Any] = []
    for v in items:
        if not isinstance(v, dict):
            raise _bad_arg_type(_MAP_T, v)
        (delete if _go_eq(v.get(_DIRECTIVE), "delete") else keep).append(v)
    return keep, delete


def _insertion_sort(items: list[Any], less: Callable[[Any, Any], bool]) -> None:
    # sort.SliceStable sorts up to 20 elements by insertion sort; with the (not strictly weak) ordering
    # below, reproducing the algorithm reproduces where elements missing from the order end up.
    for i in range(1, len(items)):
        j = i
        while j > 0 and less(items[j], items[j - 1]):
            items[j], items[j - 1] = items[j - 1], items[j]
            j -= 1


def _normalize_slice_order(to_sort: list[Any], order: list[Any], merge_key: str, kind: str) -> list[Any]:
    to_delete: list[Any] = []
    if kind == "map":
        _validate_merge_key_in_lists(merge_key, to_sort, order)
        to_sort, to_delete = _extract_to_delete_items(to_sort)
    else:
        to_sort = list(to_sort)

    def less(a: Any, b: Any) -> bool:
        ia = _index(order, a, merge_key, kind)
        if ia >= 0:
            ib = _index(order, b, merge_key, kind)
            if ib >= 0:
                return ia < ib
        return True

    _insertion_sort(to_sort, less)
    return to_sort + to_delete


def _merge_sorted_slice(
    left: list[Any], right: list[Any], server_order: list[Any], merge_key: str, kind: str
) -> list[Any]:
    """Interleave server-only items (left) into patch items (right) by their order on the server."""
    out: list[Any] = []
    i = j = 0
    for _ in range(len(left) + len(right)):
        if i >= len(left) and j < len(right):
            out.append(right[j])
            j += 1
        elif j >= len(right) and i < len(left):
            out.append(left[i])
            i += 1
        else:
            li = _index(server_order, left[i], merge_key, kind)
            ri = _index(server_order, right[j], merge_key, kind)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _normalize_element_order(
    patch: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    kind: str,
) -> list[Any]:
    patch = _normalize_slice_order(patch, patch_order, merge_key, kind)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, kind)
    return _merge_sorted_slice(server_only, patch, server_order, merge_key, kind)


def _partition_primitives(items: list[Any], partition_by: list[Any]) -> tuple[list[Any], list[Any]]:
    inside: list[Any] = []
    outside: list[Any] = []
    for v in items:
        (inside if any(_go_eq(v, p) for p in partition_by) else outside).append(v)
    return inside, outside


def _partition_maps(items: list[Any], partition_by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    inside: list[Any] = []
    outside: list[Any] = []
    for v in items:
        if not isinstance(v, dict):
            raise _bad_arg_type(_MAP_T, v)
        if merge_key not in v:
            raise _no_merge_key(v, merge_key)
        (inside if _find_map(partition_by, merge_key, v[merge_key]) is not None else outside).append(v)
    return inside, outside


# Go slices share their backing array: deleting from a list in place, or appending within its capacity,
# changes what every other slice over the same array sees. The server's element order depends on that
# (mergePatchIntoOriginal orders the result by the original list after mergeSlice has shifted and
# appended in place), so lists that get modified are modelled as Go slices, with the capacities
# encoding/json gives a decoded array (grown one append at a time) and Go's append growth.

# runtime/sizeclasses.go
_SIZE_CLASSES = (
    0, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352, 384,
    416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072,
    3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568,
    14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768,
)  # fmt: skip
_IFACE_SIZE = 16  # an interface{} element
_PAGE_SIZE = 8192


def _roundupsize(size: int) -> int:
    """runtime.roundupsize for a pointerful allocation (Go 1.22+, with the malloc header)."""
    req = size
    if req <= 32768 - 8:
        if req > 512:
            req += 8
        cls = next(c for c in _SIZE_CLASSES if c >= req)
        return cls - (req - size)
    return (req + _PAGE_SIZE - 1) // _PAGE_SIZE * _PAGE_SIZE


def _grow_cap(old_cap: int, new_len: int) -> int:
    """runtime.growslice's new capacity for a []interface{}."""
    double = old_cap + old_cap
    if new_len > double:
        new_cap = new_len
    elif old_cap < 256:
        new_cap = double
    else:
        new_cap = old_cap
        while new_cap < new_len:
            new_cap += (new_cap + 3 * 256) >> 2
    return _roundupsize(new_cap * _IFACE_SIZE) // _IFACE_SIZE


def _decoded_cap(length: int) -> int:
    cap = 0
    for n in range(1, length + 1):
        if n > cap:
            cap = _grow_cap(cap, n)
    return cap


class _GoSlice:
    """A Go slice header over a shared backing list."""

    __slots__ = ("arr", "cap", "ln", "off")

    def __init__(self, arr: list[Any], off: int, ln: int, cap: int) -> None:
        self.arr, self.off, self.ln, self.cap = arr, off, ln, cap

    @classmethod
    def decoded(cls, items: list[Any]) -> _GoSlice:
        cap = _decoded_cap(len(items))
        return cls([*items, *([None] * (cap - len(items)))], 0, len(items), cap)

    def items(self) -> list[Any]:
        return self.arr[self.off : self.off + self.ln]

    def get(self, i: int) -> Any:
        return self.arr[self.off + i]

    def set(self, i: int, value: Any) -> None:
        self.arr[self.off + i] = value

    def reslice(self, lo: int, hi: int | None = None) -> _GoSlice:
        hi = self.ln if hi is None else hi
        return _GoSlice(self.arr, self.off + lo, hi - lo, self.cap - lo)

    def append(self, *values: Any) -> _GoSlice:
        n = self.ln + len(values)
        if n <= self.cap:
            for i, v in enumerate(values):
                self.arr[self.off + self.ln + i] = v
            return _GoSlice(self.arr, self.off, n, self.cap)
        cap = _grow_cap(self.cap, n)
        return _GoSlice([*self.items(), *values, *([None] * (cap - n))], 0, n, cap)


def _deduplicate_scalars(s: _GoSlice) -> _GoSlice:
    # deduplicateScalars, in place, including the order it leaves elements in.
    length = s.ln - 1
    i = 0
    while i < length:
        j = i + 1
        while j <= length:
            if _go_eq(s.get(i), s.get(j)):
                s.set(j, s.get(length))
                s = s.reslice(0, length)
                length -= 1
                j -= 1
            j += 1
        i += 1
    return s


def _merge_slice_with_special_elements(
    original: _GoSlice, patch: list[Any], merge_key: str
) -> tuple[_GoSlice, list[Any] | None]:
    plain: list[Any] = []
    replace = False
    for v in patch:
        if _DIRECTIVE not in v:
            plain.append(v)
            continue
        directive = v[_DIRECTIVE]
        if _go_eq(directive, "delete"):
            if merge_key not in v:
                raise _no_merge_key(v, merge_key)
            value = v[merge_key]
            # deleteMatchingEntries: append(original[:i], original[i+1:]...), which shifts in place.
            while (idx := _find_map(original.items(), merge_key, value)) is not None:
                original = original.reslice(0, idx).append(*original.reslice(idx + 1).items())
        elif _go_eq(directive, "replace"):
            replace = True  # keep going: the other $patch elements are still validated and dropped
        elif _go_eq(directive, "merge"):
            raise _internal("merging lists cannot yet be specified in the patch")
        else:
            raise _internal(f"unknown patch type: {_go_s(directive)} in map: {_go_v(v)}")
    if replace:
        return _GoSlice.decoded([_verbatim(v) for v in plain]), None
    return original, plain


def _merge_slice(
    original: _GoSlice, patch: list[Any], parents: tuple[str, ...], merge_key: str, is_delete_list: bool,
    meta: PatchMeta,
) -> list[Any]:
    """mergeSlice. `original` may be shared with the caller, which then sees the in-place changes."""
    if original.ln == 0 and not patch:
        return []
    kind = _slice_kind(original.items(), patch)
    if kind != "map":
        if is_delete_list:
            return [v for v in original.items() if not any(_go_eq(v, d) for d in patch)]
        merged = _deduplicate_scalars(original.append(*patch))
        order_patch = patch
    else:
        if merge_key == "":
            raise _internal("cannot merge lists without merge key for string")
        original, plain = _merge_slice_with_special_elements(original, patch, merge_key)
        order_patch = plain or []
        merged = original
        for v in order_patch:
            if merge_key not in v:
                raise _no_merge_key(v, merge_key)
            idx = _find_map(merged.items(), merge_key, v[merge_key])
            if idx is None:
                merged = merged.append(_verbatim(v))
            else:
                merged.set(idx, _merge_map(merged.get(idx), v, parents, meta))
    if merge_key == "":
        patch_items, server_only = _partition_primitives(merged.items(), order_patch)
    else:
        patch_items, server_only = _partition_maps(merged.items(), order_patch, merge_key)
    return _normalize_element_order(patch_items, server_only, order_patch, original.items(), merge_key, kind)


def _validate_patch_with_set_order_list(patch_list: list[Any], set_order: list[Any], merge_key: str) -> None:
    if not set_order or not patch_list:
        return
    non_delete = _extract_to_delete_items(patch_list)[0] if merge_key else patch_list
    pi = si = 0
    while pi < len(non_delete) and si < len(set_order):
        item = non_delete[pi]
        if isinstance(item, dict) and _DIRECTIVE in item:
            pi += 1
            continue
        if not merge_key:
            equal = _go_eq(item, set_order[si])
        else:
            order_item = set_order[si]
            if not isinstance(item, dict):
                raise _bad_arg_type(_MAP_T, item)
            if not isinstance(order_item, dict):
                raise _bad_arg_type(_MAP_T, order_item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            if merge_key not in order_item:
                raise _no_merge_key(order_item, merge_key)
            equal = _go_eq(item[merge_key], order_item[merge_key])
        if equal:
            pi += 1
        si += 1
    if pi < len(non_delete) and si >= len(set_order):
        raise _internal(
            f"The order in patch list:\n{_go_v(patch_list)}\n doesn't match {_SET_ELEMENT_ORDER} list:\n"
            f"{_go_v(set_order)}\n"
        )


def _merge_patch_into_original(
    original: dict[str, Any], patch: dict[str, Any], parents: tuple[str, ...], meta: PatchMeta
) -> None:
    """Merge each `$setElementOrder/<field>` and its list, then order the result by the directive."""
    for key in list(patch):
        if not key.startswith(_SET_ELEMENT_ORDER) or key not in patch:
            continue
        set_order = patch.pop(key)
        if not isinstance(set_order, list):
            raise _bad_arg_type(_SLICE_T, set_order)
        field = _extract_key(key, _SET_ELEMENT_ORDER)
        found_original = field in original
        found_patch = field in patch
        original_slice = _GoSlice.decoded([])
        patch_list: list[Any] = []
        if found_original:
            if not isinstance(original[field], list):
                raise _bad_arg_type(_SLICE_T, original[field])
            original_slice = _GoSlice.decoded(original[field])
        if found_patch:
            if not isinstance(patch[field], list):
                raise _bad_arg_type(_SLICE_T, patch[field])
            patch_list = patch[field]
        strategy, merge_key = _patch_meta(meta, parents, field)
        _validate_patch_with_set_order_list(patch_list, set_order, merge_key)

        from_patch_only = False
        if found_original and not found_patch:
            merged = original_slice.items()
        elif found_patch and not found_original:
            merged, from_patch_only = _remove_directives(patch_list)[1], True
        elif found_original and found_patch:
            if strategy == "merge":
                merged = _merge_slice(original_slice, patch_list, (*parents, field), merge_key, False, meta)
            else:
                merged, from_patch_only = patch_list, True
        else:
            continue

        if merge_key == "":
            patch_items, server_only = _partition_primitives(merged, set_order)
        else:
            patch_items, server_only = _partition_maps(merged, set_order, merge_key)
        # The original list as mergeSlice left it: what it shifted and appended in place shows here.
        server_order = original_slice.items()
        kind = _slice_kind(server_order, patch_list)
        ordered = _normalize_element_order(patch_items, server_only, set_order, server_order, merge_key, kind)
        original[field] = _verbatim(ordered) if from_patch_only else ordered
        patch.pop(field, None)


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise PatchError(_ERR_RETAIN_KEYS, 400)
    keep = {v for v in retain if isinstance(v, str)}
    for k, v in patch.items():
        if v is None or k.startswith(_DELETE_FROM_PRIMITIVE_LIST) or k.startswith(_SET_ELEMENT_ORDER):
            continue
        if k not in keep:
            raise PatchError(_ERR_RETAIN_KEYS, 400)
    for k in [k for k in original if k not in keep]:
        del original[k]


def _merge_map(
    original: dict[str, Any] | None, patch: dict[str, Any], parents: tuple[str, ...], meta: PatchMeta
) -> dict[str, Any]:
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if _go_eq(directive, "replace"):
            return _verbatim({k: v for k, v in patch.items() if k != _DIRECTIVE})
        if _go_eq(directive, "delete"):
            return {}
        # Includes "merge": the real server accepts no $patch value other than replace/delete in a map.
        raise _internal(f"unknown patch type: {_go_s(directive)} in map: {_go_v(patch)}")
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    _merge_patch_into_original(original, patch, parents, meta)

    for key, patch_v in list(patch.items()):
        k = key
        is_delete_list = False
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            k = _extract_key(key, _DELETE_FROM_PRIMITIVE_LIST)
            is_delete_list = True
        if patch_v is None:
            original.pop(k, None)
            continue
        if k not in original or _go_type(original[k]) != _go_type(patch_v):
            # Nothing to merge with; a deletion list for a list the original lacks is ignored.
            if not is_delete_list:
                _store_unmerged(original, k, patch_v)
            continue
        current = original[k]
        if isinstance(current, dict):
            original[k] = _merge_map(current, patch_v, (*parents, k), meta)
        elif isinstance(current, list):
            strategy, merge_key = _patch_meta(meta, parents, k)
            # A deletion list deletes whatever the field's strategy; other lists without one are replaced.
            if strategy == "merge" or is_delete_list:
                original[k] = _merge_slice(
                    _GoSlice.decoded(current), patch_v, (*parents, k), merge_key, is_delete_list, meta
                )
            else:
                original[k] = _verbatim(patch_v)
        else:
            original[k] = patch_v
    return original


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any], meta: PatchMeta | None = None) -> dict[str, Any]:
    """Apply a Kubernetes strategic merge patch to `target` and return the result.

    Maps merge recursively and `null` deletes a key. Lists whose field is in `MERGE_KEYS` merge element
    by element on that key; lists in `PRIMITIVE_MERGE_LISTS` merge as ordered sets; every other list is
    replaced. In a merged list, elements only the server has keep their relative order, and the patch's
    elements are placed by the patch's order — so a new element lands *before* the server's elements
    that follow none of the patch's (the real server's order, e.g. a container added by `kubectl patch`
    becomes the first container). Directives: `$patch: replace|delete` in a map or as a list element,
    `$retainKeys`, `$setElementOrder/<field>`, `$deleteFromPrimitiveList/<field>`. A `null` patch is a
    no-op. `meta`: the tables to merge by (default: `MERGE_KEYS` and `PRIMITIVE_MERGE_LISTS`).
    """
    if patch is None:
        return copy.deepcopy(target)
    if not isinstance(patch, dict):
        raise PatchError(f"json: cannot unmarshal {_json_kind(patch)} into Go value of type {_MAP_T}", 400)
    if target is not None and not isinstance(target, dict):
        raise TypeError(f"strategic merge patch target must be a dict, not {type(target).__name__}")
    return _merge_map(copy.deepcopy(target), copy.deepcopy(patch), (), meta or PatchMeta(MERGE_KEYS, PRIMITIVE_MERGE_LISTS))
