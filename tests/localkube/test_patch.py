"""PATCH bodies apply (and fail) exactly as kube-apiserver applies them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import localkube.patch as patch_module
from localkube.patch import (
    BUILTIN_PATCH_TYPES,
    CUSTOM_RESOURCE_PATCH_TYPES,
    MAX_JSON_PATCH_OPERATIONS,
    MERGE_KEYS,
    PRIMITIVE_MERGE_LISTS,
    PatchError,
    apply_patch,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)

GENERIC_422 = "the server rejected our request due to an error in our request"
NO_PATH = "operation missing path field: missing value"
NO_FROM = "operation, missing from field: missing value"
NOT_A_MAP = "json: cannot unmarshal {} into Go value of type map[string]interface {{}}"
NOT_OPS = "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
DUP1 = {"name": 2, "value": "dup1"}
DUP2 = {"name": 2, "value": "dup2"}


def _raises(fn: Any, *args: Any, **kwargs: Any) -> PatchError:
    with pytest.raises(PatchError) as info:
        fn(*args, **kwargs)
    return info.value


def _pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": list(containers), **spec},
    }


def _names(items: list[dict[str, Any]], key: str = "name") -> list[Any]:
    return [item[key] for item in items]


# ---------------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386)


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_reproduces_the_rfc_7386_examples(target: Any, patch: Any, expected: Any) -> None:
    assert json_merge_patch(target, patch) == expected


@pytest.mark.parametrize("patch", [None, "bar", 7, True])
def test_merge_patch_rejects_a_null_or_scalar_patch_with_400_unlike_the_rfc(patch: Any) -> None:
    err = _raises(json_merge_patch, {"a": "foo"}, patch)
    assert (err.code, err.reason, str(err)) == (400, "BadRequest", "Invalid JSON Patch")


def test_merge_patch_of_a_null_document_is_a_500() -> None:
    err = _raises(json_merge_patch, None, {"a": 1})
    assert (err.code, err.reason, str(err)) == (500, "", "Invalid JSON Document")


def test_merge_patch_drops_nulls_inside_a_new_object_but_keeps_them_inside_a_replacing_array() -> None:
    target = {"spec": {"tags": {"x": 1}}}
    patch = {"spec": {"new": {"a": None, "b": 1}, "tags": [{"k": None}, None]}}
    # The library prunes null members only where it copies a value into a missing key.
    assert json_merge_patch(target, patch) == {"spec": {"tags": [{"k": None}, None], "new": {"b": 1}}}


def test_merge_patch_treats_a_null_in_the_document_as_a_missing_key() -> None:
    assert json_merge_patch({"a": None}, {"a": {"b": None, "c": 1}}) == {"a": {"c": 1}}


def test_merge_patch_does_not_modify_its_inputs() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": [1]}}
    patch = {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"x": [2]}}
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    result = json_merge_patch(target, patch)
    result["spec"]["x"].append(3)
    assert (target, patch) == (target_before, patch_before)
    assert result["metadata"]["labels"] == {"b": "2"}


# ---------------------------------------------------------------------------------------------------
# JSON patch (RFC 6902)

DOC: dict[str, Any] = {"metadata": {"labels": {"app": "web"}}, "spec": {"ports": [80, 443], "x": None}}


def test_json_patch_add_sets_an_object_member() -> None:
    result = json_patch(DOC, [{"op": "add", "path": "/metadata/labels/tier", "value": "db"}])
    assert result["metadata"]["labels"] == {"app": "web", "tier": "db"}


def test_json_patch_add_replaces_an_existing_object_member() -> None:
    assert json_patch(DOC, [{"op": "add", "path": "/metadata/labels/app", "value": "x"}])["metadata"] == {
        "labels": {"app": "x"}
    }


def test_json_patch_add_inserts_into_an_array_and_dash_appends() -> None:
    ops = [
        {"op": "add", "path": "/spec/ports/0", "value": 22},
        {"op": "add", "path": "/spec/ports/-", "value": 8080},
        {"op": "add", "path": "/spec/ports/4", "value": 9090},
    ]
    assert json_patch(DOC, ops)["spec"]["ports"] == [22, 80, 443, 8080, 9090]


def test_json_patch_counts_negative_indices_from_the_end_as_the_server_library_does() -> None:
    ops = [{"op": "add", "path": "/spec/ports/-1", "value": 1}, {"op": "remove", "path": "/spec/ports/-3"}]
    assert json_patch(DOC, ops)["spec"]["ports"] == [443, 1]


def test_json_patch_add_without_value_adds_null() -> None:
    assert json_patch(DOC, [{"op": "add", "path": "/spec/y"}])["spec"]["y"] is None


def test_json_patch_add_past_the_end_of_an_array_fails_with_422() -> None:
    err = _raises(json_patch, DOC, [{"op": "add", "path": "/spec/ports/3", "value": 1}])
    assert err.code == 422
    assert str(err) == (
        "error in add for path: '/spec/ports/3': Unable to access invalid index: 3: invalid index referenced"
    )


def test_json_patch_add_with_a_non_numeric_array_index_fails() -> None:
    err = _raises(json_patch, DOC, [{"op": "add", "path": "/spec/ports/first", "value": 1}])
    assert str(err) == (
        "error in add for path: '/spec/ports/first': value was not a proper array index: 'first': "
        'strconv.Atoi: parsing "first": invalid syntax'
    )


def test_json_patch_add_under_a_missing_parent_fails_with_422() -> None:
    err = _raises(json_patch, DOC, [{"op": "add", "path": "/status/phase", "value": "Running"}])
    assert (err.code, err.reason) == (422, "Invalid")
    assert str(err) == 'add operation does not apply: doc is missing path: "/status/phase": missing value'
    assert err.status_message == GENERIC_422


def test_json_patch_add_at_the_root_fails_as_in_the_server_library() -> None:
    err = _raises(json_patch, DOC, [{"op": "add", "path": "", "value": {}}])
    assert str(err) == 'add operation does not apply: doc is missing path: "": missing value'


def test_json_patch_remove_deletes_members_and_elements() -> None:
    ops = [{"op": "remove", "path": "/metadata/labels/app"}, {"op": "remove", "path": "/spec/ports/0"}]
    result = json_patch(DOC, ops)
    assert result["metadata"]["labels"] == {}
    assert result["spec"]["ports"] == [443]


def test_json_patch_remove_of_a_null_member_succeeds() -> None:
    assert "x" not in json_patch(DOC, [{"op": "remove", "path": "/spec/x"}])["spec"]


def test_json_patch_remove_of_a_missing_key_fails_with_422() -> None:
    err = _raises(json_patch, DOC, [{"op": "remove", "path": "/metadata/annotations"}])
    assert err.code == 422
    assert str(err) == (
        "error in remove for path: '/metadata/annotations': Unable to remove nonexistent key: annotations: "
        "missing value"
    )


def test_json_patch_remove_past_the_end_of_an_array_fails() -> None:
    err = _raises(json_patch, DOC, [{"op": "remove", "path": "/spec/ports/2"}])
    assert "Unable to access invalid index: 2" in str(err)


def test_json_patch_replace_changes_a_value() -> None:
    result = json_patch(DOC, [{"op": "replace", "path": "/spec/ports/1", "value": 8443}])
    assert result["spec"]["ports"] == [80, 8443]


def test_json_patch_replace_of_a_missing_object_key_adds_it_as_the_server_library_does() -> None:
    result = json_patch(DOC, [{"op": "replace", "path": "/metadata/labels/tier", "value": "db"}])
    assert result["metadata"]["labels"] == {"app": "web", "tier": "db"}


def test_json_patch_replace_under_a_missing_parent_fails_with_422() -> None:
    err = _raises(json_patch, DOC, [{"op": "replace", "path": "/spec/foo/bar", "value": 1}])
    assert (err.code, str(err)) == (
        422,
        "replace operation does not apply: doc is missing path: /spec/foo/bar: missing value",
    )


def test_json_patch_replace_of_a_missing_array_index_fails_with_422() -> None:
    err = _raises(json_patch, DOC, [{"op": "replace", "path": "/spec/ports/2", "value": 1}])
    assert str(err) == "replace operation does not apply: doc is missing key: /spec/ports/2: missing value"


def test_json_patch_replace_of_the_root_swaps_the_document() -> None:
    assert json_patch(DOC, [{"op": "replace", "path": "", "value": {"a": 1}}]) == {"a": 1}
    err = _raises(json_patch, DOC, [{"op": "replace", "path": "", "value": "x"}])
    assert str(err) == "replace operation value must be object or array: %!w(<nil>)"


def test_json_patch_move_relocates_a_value() -> None:
    result = json_patch(DOC, [{"op": "move", "from": "/spec/ports", "path": "/metadata/ports"}])
    assert result["metadata"]["ports"] == [80, 443]
    assert "ports" not in result["spec"]


def test_json_patch_move_from_a_missing_key_fails() -> None:
    err = _raises(json_patch, DOC, [{"op": "move", "from": "/spec/nope", "path": "/spec/y"}])
    assert (err.code, str(err)) == (
        422,
        "error in move for path: 'nope': Unable to remove nonexistent key: nope: missing value",
    )


def test_json_patch_move_into_its_own_child_fails() -> None:
    err = _raises(json_patch, DOC, [{"op": "move", "from": "/spec", "path": "/spec/inner"}])
    assert (
        str(err)
        == "move operation does not apply: doc is missing destination path: /spec/inner: missing value"
    )


def test_json_patch_copy_duplicates_a_value_without_sharing_it() -> None:
    ops = [
        {"op": "copy", "from": "/spec/ports", "path": "/spec/backup"},
        {"op": "add", "path": "/spec/backup/-", "value": 1},
    ]
    result = json_patch(DOC, ops)
    assert result["spec"]["ports"] == [80, 443]
    assert result["spec"]["backup"] == [80, 443, 1]


def test_json_patch_copy_from_a_missing_key_copies_null() -> None:
    assert json_patch(DOC, [{"op": "copy", "from": "/spec/nope", "path": "/spec/y"}])["spec"]["y"] is None


def test_json_patch_copy_from_a_missing_parent_fails() -> None:
    err = _raises(json_patch, DOC, [{"op": "copy", "from": "/nope/a", "path": "/spec/y"}])
    assert str(err) == "copy operation does not apply: doc is missing from path: /nope/a: missing value"


def test_json_patch_test_passes_on_equal_values_and_changes_nothing() -> None:
    ops = [
        {"op": "test", "path": "/spec/ports", "value": [80, 443]},
        {"op": "test", "path": "/metadata", "value": {"labels": {"app": "web"}}},
        {"op": "test", "path": "/spec/x", "value": None},
        {"op": "test", "path": "/spec/missing"},
    ]
    assert json_patch(DOC, ops) == DOC


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("/metadata/labels/app", "api"),
        ("/spec/ports", [443, 80]),
        ("/spec/ports/0", 80.0),
        ("/spec/ports/0", "80"),
        ("/spec/missing", "x"),
        ("/metadata", {"labels": {"app": "web"}, "extra": 1}),
    ],
)
def test_json_patch_test_fails_with_422_on_a_different_value(path: str, value: Any) -> None:
    err = _raises(json_patch, DOC, [{"op": "test", "path": path, "value": value}])
    assert (err.code, str(err)) == (422, f"testing value {path} failed: test failed")


def test_json_patch_test_without_value_fails_on_a_present_member() -> None:
    err = _raises(json_patch, DOC, [{"op": "test", "path": "/metadata/labels/app"}])
    assert str(err) == "testing value /metadata/labels/app failed: test failed"


def test_json_patch_failed_test_leaves_the_document_unchanged() -> None:
    target = copy.deepcopy(DOC)
    ops = [
        {"op": "add", "path": "/metadata/labels/tier", "value": "db"},
        {"op": "test", "path": "/metadata/labels/app", "value": "other"},
    ]
    _raises(json_patch, target, ops)
    assert target == DOC


def test_json_patch_unescapes_tilde_and_slash_in_pointer_tokens() -> None:
    target = {"metadata": {"annotations": {"example.com/a~b": "1", "~1": "literal"}}}
    ops = [
        {"op": "replace", "path": "/metadata/annotations/example.com~1a~0b", "value": "2"},
        {"op": "add", "path": "/metadata/annotations/new~1key", "value": "3"},
        {"op": "remove", "path": "/metadata/annotations/~01"},
    ]
    assert json_patch(target, ops)["metadata"]["annotations"] == {"example.com/a~b": "2", "new/key": "3"}


@pytest.mark.parametrize(
    ("op", "message"),
    [
        ({"op": "frobnicate", "path": "/a"}, "Unexpected kind: frobnicate"),
        ({"path": "/a"}, "Unexpected kind: unknown"),
        ({"op": "add", "value": 1}, "add operation failed to decode path: missing value"),
        ({"op": "remove"}, "remove operation failed to decode path: missing value"),
        ({"op": "replace"}, f"replace operation failed to decode path: {NO_PATH}"),
        ({"op": "move", "path": "/a"}, f"move operation failed to decode from: {NO_FROM}"),
        ({"op": "copy", "path": "/a"}, f"copy operation failed to decode from: {NO_FROM}"),
        ({"op": "test"}, f"test operation failed to decode path: {NO_PATH}"),
    ],
)
def test_json_patch_operations_missing_fields_fail_with_422(op: dict[str, Any], message: str) -> None:
    err = _raises(json_patch, DOC, [op])
    assert (err.code, str(err)) == (422, message)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"op": "add"}, "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"),
        ("add", "json: cannot unmarshal string into Go value of type []handlers.jsonPatchOp"),
        ([1], "json: cannot unmarshal number into Go value of type handlers.jsonPatchOp"),
        ([{"op": 1}], "json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string"),
        (
            [{"path": ["a"]}],
            "json: cannot unmarshal array into Go struct field jsonPatchOp.path of type string",
        ),
    ],
)
def test_json_patch_body_that_is_not_a_list_of_operations_is_a_400(body: Any, message: str) -> None:
    err = _raises(json_patch, DOC, body)
    assert (err.code, err.reason, str(err)) == (400, "BadRequest", f"error decoding patch: {message}")


def test_json_patch_null_body_and_null_operation_behave_as_the_server_decodes_them() -> None:
    assert json_patch(DOC, None) == DOC
    assert str(_raises(json_patch, DOC, [None])) == "Unexpected kind: unknown"


def test_json_patch_with_more_than_10000_operations_is_a_413() -> None:
    ops = [{"op": "test", "path": "/spec/x", "value": None}] * (MAX_JSON_PATCH_OPERATIONS + 1)
    err = _raises(json_patch, DOC, ops)
    assert (err.code, err.reason) == (413, "RequestEntityTooLarge")
    assert str(err).endswith("is 10000, got 10001")


def test_json_patch_does_not_modify_the_target_or_the_operations() -> None:
    target = copy.deepcopy(DOC)
    ops = [
        {"op": "add", "path": "/spec/list", "value": [1]},
        {"op": "add", "path": "/spec/list/-", "value": 2},
        {"op": "remove", "path": "/metadata/labels/app"},
    ]
    ops_before = copy.deepcopy(ops)
    result = json_patch(target, ops)
    assert result["spec"]["list"] == [1, 2]
    assert (target, ops) == (DOC, ops_before)


# ---------------------------------------------------------------------------------------------------
# Strategic merge patch


def test_exported_tables_name_the_merge_keys_and_primitive_merge_lists() -> None:
    assert MERGE_KEYS["containers"] == "name"
    assert MERGE_KEYS["volumeMounts"] == "mountPath"
    assert MERGE_KEYS["ownerReferences"] == "uid"
    assert MERGE_KEYS["conditions"] == "type"
    assert "finalizers" in PRIMITIVE_MERGE_LISTS


def test_strategic_patch_merges_maps_and_deletes_keys_set_to_null() -> None:
    target = _pod({"name": "app", "image": "nginx"})
    target["metadata"]["annotations"] = {"a": "1", "b": "2"}
    patch = {"metadata": {"labels": {"tier": "web"}, "annotations": {"a": None, "c": "3"}}}
    result = strategic_merge_patch(target, patch)
    assert result["metadata"]["labels"] == {"app": "web", "tier": "web"}
    assert result["metadata"]["annotations"] == {"b": "2", "c": "3"}
    assert result["spec"] == target["spec"]


def test_strategic_patch_merges_containers_by_name() -> None:
    target = _pod(
        {"name": "app", "image": "nginx:1", "ports": [{"containerPort": 80}]},
        {"name": "side", "image": "busybox"},
    )
    patch = {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}
    result = strategic_merge_patch(target, patch)
    assert result["spec"]["containers"] == [
        {"name": "app", "image": "nginx:2", "ports": [{"containerPort": 80}]},
        {"name": "side", "image": "busybox"},
    ]


def test_strategic_patch_puts_a_new_container_before_the_existing_ones_as_the_server_does() -> None:
    # kubectl's "Update API Objects in Place" task shows the added patch-demo-ctr-2 listed first.
    target = _pod({"name": "patch-demo-ctr", "image": "nginx"})
    patch = {"spec": {"containers": [{"name": "patch-demo-ctr-2", "image": "redis"}]}}
    assert _names(strategic_merge_patch(target, patch)["spec"]["containers"]) == [
        "patch-demo-ctr-2",
        "patch-demo-ctr",
    ]


def test_strategic_patch_orders_merged_elements_by_the_patch_and_keeps_server_only_ones_in_place() -> None:
    # The server's own example: live [B, C, A], patch [A', B', D] -> [C, A', B', D].
    target = {"spec": {"containers": [{"name": "B"}, {"name": "C"}, {"name": "A"}]}}
    patch = {
        "spec": {"containers": [{"name": "A", "image": "a"}, {"name": "B", "image": "b"}, {"name": "D"}]}
    }
    result = strategic_merge_patch(target, patch)["spec"]["containers"]
    assert result == [{"name": "C"}, {"name": "A", "image": "a"}, {"name": "B", "image": "b"}, {"name": "D"}]


def test_strategic_patch_merges_env_by_name_inside_a_deployment_template() -> None:
    target = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
                    ]
                }
            }
        }
    }
    patch = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "3"}]}]}}
        }
    }
    env = strategic_merge_patch(target, patch)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]


def test_strategic_patch_merges_volume_mounts_by_mount_path() -> None:
    target = _pod({"name": "app", "volumeMounts": [{"name": "data", "mountPath": "/data"}]})
    patch = {
        "spec": {"containers": [{"name": "app", "volumeMounts": [{"mountPath": "/data", "readOnly": True}]}]}
    }
    mounts = strategic_merge_patch(target, patch)["spec"]["containers"][0]["volumeMounts"]
    assert mounts == [{"name": "data", "mountPath": "/data", "readOnly": True}]


def test_strategic_patch_merges_conditions_by_type() -> None:
    target = {
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "Starting"},
                {"type": "Scheduled", "status": "True"},
            ]
        }
    }
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": None}]}}
    conditions = strategic_merge_patch(target, patch)["status"]["conditions"]
    assert conditions == [{"type": "Ready", "status": "True"}, {"type": "Scheduled", "status": "True"}]


def test_strategic_patch_merges_owner_references_by_uid() -> None:
    target = {"metadata": {"ownerReferences": [{"uid": "u1", "name": "rs-1", "kind": "ReplicaSet"}]}}
    patch = {"metadata": {"ownerReferences": [{"uid": "u1", "controller": True}, {"uid": "u2", "name": "x"}]}}
    refs = strategic_merge_patch(target, patch)["metadata"]["ownerReferences"]
    assert refs == [
        {"uid": "u1", "name": "rs-1", "kind": "ReplicaSet", "controller": True},
        {"uid": "u2", "name": "x"},
    ]


def test_strategic_patch_merges_finalizers_as_a_set() -> None:
    target = {"metadata": {"finalizers": ["a", "b"]}}
    assert strategic_merge_patch(target, {"metadata": {"finalizers": ["b", "c"]}})["metadata"][
        "finalizers"
    ] == [
        "a",
        "b",
        "c",
    ]


def test_strategic_patch_removes_finalizers_with_delete_from_primitive_list() -> None:
    target = {"metadata": {"finalizers": ["a", "b", "c"]}}
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zzz"]}}
    assert strategic_merge_patch(target, patch)["metadata"]["finalizers"] == ["a", "c"]


def test_strategic_patch_ignores_a_deletion_list_for_a_list_the_object_lacks() -> None:
    target = {"metadata": {"name": "x"}}
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}
    assert strategic_merge_patch(target, patch) == target


def test_strategic_patch_deletion_list_applies_to_a_list_without_merge_strategy() -> None:
    target = _pod({"name": "app", "args": ["--a", "--b"]})
    patch = {"spec": {"containers": [{"name": "app", "$deleteFromPrimitiveList/args": ["--a"]}]}}
    assert strategic_merge_patch(target, patch)["spec"]["containers"][0]["args"] == ["--b"]


def test_strategic_patch_replaces_lists_without_a_merge_key() -> None:
    target = _pod({"name": "app", "args": ["a", "b"]}, tolerations=[{"key": "k1"}, {"key": "k2"}])
    patch = {"spec": {"tolerations": [{"key": "k3"}], "containers": [{"name": "app", "args": ["c"]}]}}
    result = strategic_merge_patch(target, patch)["spec"]
    assert result["tolerations"] == [{"key": "k3"}]
    assert result["containers"][0]["args"] == ["c"]


def test_strategic_patch_keys_ports_by_container_port_in_containers_and_by_port_in_a_service() -> None:
    pod = _pod({"name": "app", "ports": [{"containerPort": 80, "name": "http"}]})
    pod_patch = {"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 443}]}]}}
    assert _names(
        strategic_merge_patch(pod, pod_patch)["spec"]["containers"][0]["ports"], "containerPort"
    ) == [443, 80]

    service = {"kind": "Service", "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
    service_patch = {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}
    assert strategic_merge_patch(service, service_patch)["spec"]["ports"] == [
        {"port": 80, "targetPort": 9090}
    ]

    policy = {"spec": {"ingress": [{"ports": [{"port": 80}]}]}}
    assert strategic_merge_patch(policy, {"spec": {"ingress": [{"ports": [{"port": 81}]}]}}) == {
        "spec": {"ingress": [{"ports": [{"port": 81}]}]}
    }


def test_strategic_patch_replace_directive_replaces_a_whole_map() -> None:
    target = {"metadata": {"labels": {"a": "1", "b": "2"}}}
    patch = {"metadata": {"labels": {"$patch": "replace", "c": "3"}}}
    assert strategic_merge_patch(target, patch) == {"metadata": {"labels": {"c": "3"}}}


def test_strategic_patch_delete_directive_empties_a_map() -> None:
    target = {"spec": {"nodeSelector": {"disk": "ssd"}, "x": 1}}
    assert strategic_merge_patch(target, {"spec": {"nodeSelector": {"$patch": "delete"}}}) == {
        "spec": {"nodeSelector": {}, "x": 1}
    }


def test_strategic_patch_directives_at_the_top_level_apply_to_the_whole_object() -> None:
    assert strategic_merge_patch({"a": 1, "b": 2}, {"$patch": "replace", "c": 3}) == {"c": 3}
    assert strategic_merge_patch({"a": 1}, {"$patch": "delete"}) == {}


def test_strategic_patch_delete_directive_removes_list_elements_by_merge_key() -> None:
    target = _pod({"name": "app"}, {"name": "side"}, {"name": "app"})
    patch = {
        "spec": {"containers": [{"name": "app", "$patch": "delete"}, {"name": "gone", "$patch": "delete"}]}
    }
    assert strategic_merge_patch(target, patch)["spec"]["containers"] == [{"name": "side"}]


def test_strategic_patch_replace_directive_element_replaces_the_whole_list() -> None:
    target = _pod({"name": "app", "image": "a"}, {"name": "side"})
    patch = {"spec": {"containers": [{"name": "new", "image": "n"}, {"$patch": "replace"}]}}
    assert strategic_merge_patch(target, patch)["spec"]["containers"] == [{"name": "new", "image": "n"}]
    assert (
        strategic_merge_patch(target, {"spec": {"containers": [{"$patch": "replace"}]}})["spec"]["containers"]
        == []
    )


def test_strategic_patch_merge_directive_is_refused_as_the_server_refuses_it() -> None:
    err = _raises(strategic_merge_patch, {"spec": {"a": 1}}, {"spec": {"$patch": "merge", "b": 2}})
    assert (err.code, err.reason, str(err)) == (
        500,
        "",
        "unknown patch type: merge in map: map[$patch:merge b:2]",
    )
    err = _raises(strategic_merge_patch, _pod({"name": "a"}), {"spec": {"containers": [{"$patch": "merge"}]}})
    assert (err.code, str(err)) == (500, "merging lists cannot yet be specified in the patch")


def test_strategic_patch_unknown_directive_is_a_500_with_the_server_message() -> None:
    err = _raises(
        strategic_merge_patch,
        _pod({"name": "a"}),
        {"spec": {"containers": [{"name": "a", "$patch": "bogus"}]}},
    )
    assert (err.code, err.reason, err.status_message) == (
        500,
        "",
        "unknown patch type: bogus in map: map[$patch:bogus name:a]",
    )


def test_strategic_patch_list_element_without_its_merge_key_is_a_500_with_the_server_message() -> None:
    target = _pod({"name": "app", "image": "nginx"})
    err = _raises(strategic_merge_patch, target, {"spec": {"containers": [{"image": "nginx:1.25"}]}})
    assert (err.code, err.reason) == (500, "")
    assert str(err) == "map: map[image:nginx:1.25] does not contain declared merge key: name"


def test_strategic_patch_retain_keys_clears_fields_not_listed() -> None:
    target = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert strategic_merge_patch(target, patch) == {"spec": {"strategy": {"type": "Recreate"}}}


@pytest.mark.parametrize(
    "strategy",
    [
        {"$retainKeys": "type", "type": "Recreate"},
        {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}},
    ],
)
def test_strategic_patch_retain_keys_that_is_not_a_list_or_omits_a_patched_key_is_a_400(
    strategy: dict[str, Any],
) -> None:
    err = _raises(strategic_merge_patch, {"spec": {"strategy": {}}}, {"spec": {"strategy": strategy}})
    assert (err.code, str(err)) == (400, "invalid patch format of retainKeys")


def test_strategic_patch_set_element_order_reorders_the_list() -> None:
    target = _pod({"name": "a"}, {"name": "b"}, {"name": "c"})
    patch = {"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}]}}
    assert _names(strategic_merge_patch(target, patch)["spec"]["containers"]) == ["c", "a", "b"]


def test_strategic_patch_set_element_order_that_contradicts_the_patch_list_is_a_500() -> None:
    target = _pod({"name": "a"}, {"name": "b"})
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b"}, {"name": "a"}],
        }
    }
    err = _raises(strategic_merge_patch, target, patch)
    assert err.code == 500
    assert str(err).startswith(
        "The order in patch list:\n[map[name:b] map[name:a]]\n doesn't match $setElementOrder list"
    )


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"$setElementOrder": [{"name": "a"}]}, "invalid patch format of setElementOrder list"),
        ({"$deleteFromPrimitiveListX/finalizers": ["a"]}, "invalid patch format of primitive list"),
    ],
)
def test_strategic_patch_malformed_directive_keys_are_a_400(patch: dict[str, Any], message: str) -> None:
    err = _raises(strategic_merge_patch, {"metadata": {}}, patch)
    assert (err.code, err.reason, str(err)) == (400, "BadRequest", message)


def test_strategic_patch_merging_a_list_of_lists_is_a_422() -> None:
    err = _raises(strategic_merge_patch, {"finalizers": [["a"]]}, {"finalizers": [["b"]]})
    assert (err.code, err.status_message) == (422, GENERIC_422)
    assert str(err) == "lists of lists are not supported"


def test_strategic_patch_strips_directives_and_nulls_from_values_it_adds_unmerged() -> None:
    target: dict[str, Any] = {"spec": {}}
    patch = {
        "spec": {
            "template": {"metadata": {"labels": {"a": "1", "b": None}}, "gone": {"$patch": "delete"}},
            "containers": [{"name": "x", "$patch": "delete"}, {"name": "y", "resources": None}],
        }
    }
    assert strategic_merge_patch(target, patch) == {
        "spec": {"template": {"metadata": {"labels": {"a": "1"}}}, "containers": [{"name": "y"}]}
    }


def test_strategic_patch_null_patch_is_a_no_op_and_non_object_patch_is_a_400() -> None:
    target = _pod({"name": "app"})
    assert strategic_merge_patch(target, None) == target  # type: ignore[arg-type]
    err = _raises(strategic_merge_patch, target, ["x"])
    assert (err.code, str(err)) == (
        400,
        "json: cannot unmarshal array into Go value of type map[string]interface {}",
    )


def test_strategic_patch_does_not_modify_its_inputs() -> None:
    target = _pod({"name": "app", "env": [{"name": "A", "value": "1"}]}, {"name": "side"})
    target["metadata"]["finalizers"] = ["f1", "f2"]
    patch = {
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"], "labels": {"app": None}},
        "spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
            "containers": [{"name": "app", "env": [{"name": "A", "$patch": "delete"}]}],
        },
    }
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    result = strategic_merge_patch(target, patch)
    assert (target, patch) == (target_before, patch_before)
    assert result["metadata"]["finalizers"] == ["f2"]
    assert result["spec"]["containers"] == [{"name": "side"}, {"name": "app", "env": []}]


# The apply half of apimachinery's own strategicpatch test fixtures (patch_test.go), on its test type:
# mergingList / mergeItemPtr / retainKeysMergingList keyed by name, mergingIntList a merged scalar list.
UPSTREAM_CASES: list[tuple[str, Any, Any, Any]] = [
    (
        "add map and delete map from merging list",
        {"mergingList": [{"name": 1}, {"name": 2, "other": "b"}, {"name": 4, "other": "c"}]},
        {
            "$setElementOrder/mergingList": [{"name": 2}, {"name": 3}],
            "mergingList": [{"name": 3}, {"name": 1, "$patch": "delete"}],
        },
        {"mergingList": [{"name": 2, "other": "b"}, {"name": 4, "other": "c"}, {"name": 3}]},
    ),
    (
        "add map and delete map from merging list with conflict",
        {"mergingList": [{"name": 1, "other": "a"}, {"name": 4, "other": "c"}]},
        {
            "$setElementOrder/mergingList": [{"name": 2}, {"name": 3}],
            "mergingList": [{"name": 2}, {"name": 3}, {"name": 1, "$patch": "delete"}],
        },
        {"mergingList": [{"name": 4, "other": "c"}, {"name": 2}, {"name": 3}]},
    ),
    (
        "nested patch merge with empty list",
        {"name": "hi", "mergingList": [{"name": "hello2"}]},
        {
            "$setElementOrder/mergingList": [{"name": "hello"}, {"name": "doesntexist"}],
            "mergingList": [{"name": "hello"}],
        },
        {"name": "hi", "mergingList": [{"name": "hello"}, {"name": "hello2"}]},
    ),
    (
        "nested patch merge with empty list, two-way",
        {"name": "hi"},
        {"mergingList": [{"name": "hello"}, {"$patch": "delete", "name": "doesntexist"}]},
        {"name": "hi", "mergingList": [{"name": "hello"}]},
    ),
    (
        "add an item in a list of primitives and preserve order",
        {"mergingIntList": [1, 4, 2]},
        {"$setElementOrder/mergingIntList": [3, 1, 2], "mergingIntList": [3]},
        {"mergingIntList": [3, 1, 4, 2]},
    ),
    (
        "add and delete items in lists of scalars",
        {"mergingIntList": [1, 2, 3, 4]},
        {"$setElementOrder/mergingIntList": [1, 2, 4], "$deleteFromPrimitiveList/mergingIntList": [3]},
        {"mergingIntList": [1, 2, 4]},
    ),
    (
        "retainKeys map adds an item and deletes an item in nested merging int list",
        {"retainKeysMap": {"name": "foo", "mergingIntList": [1, 2, 3, 4]}},
        {
            "retainKeysMap": {
                "$retainKeys": ["mergingIntList", "name"],
                "mergingIntList": [5],
                "$deleteFromPrimitiveList/mergingIntList": [2],
                "$setElementOrder/mergingIntList": [1, 3, 5],
            }
        },
        {"retainKeysMap": {"name": "foo", "mergingIntList": [1, 3, 5, 4]}},
    ),
    (
        "set elements order in a list with server-only items 3",
        {"mergingList": [{"name": n} for n in (1, 2, 7, 9, 8, 3, 4)]},
        {"$setElementOrder/mergingList": [{"name": 2}, {"name": 1}, {"name": 4}, {"name": 3}]},
        {"mergingList": [{"name": n} for n in (2, 1, 7, 9, 8, 4, 3)]},
    ),
    (
        "add map to merging list by pointer",
        {"mergeItemPtr": [{"name": 1, "other": "a"}, {"name": 3}]},
        {"$setElementOrder/mergeItemPtr": [{"name": 1}, {"name": 2}], "mergeItemPtr": [{"name": 2}]},
        {"mergeItemPtr": [{"name": 1, "other": "a"}, {"name": 2}, {"name": 3}]},
    ),
    (
        "behavior of set element order for a merging list with duplicate",
        {"mergingList": [{"name": 1}, DUP1, {"name": 3}, DUP2, {"name": 4}]},
        {"$setElementOrder/mergingList": [{"name": 2}, {"name": 1}, {"name": 4}, {"name": 3}, {"name": 2}]},
        {"mergingList": [DUP1, DUP2, {"name": 1}, {"name": 4}, {"name": 3}]},
    ),
    (
        "retainKeys list of maps deletes a field and clear a field",
        {"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "a", "other": "x"}]},
        {
            "$setElementOrder/retainKeysMergingList": [{"name": "bar"}, {"name": "foo"}],
            "retainKeysMergingList": [{"$retainKeys": ["name"], "name": "foo", "value": None}],
        },
        {"retainKeysMergingList": [{"name": "bar"}, {"name": "foo"}]},
    ),
    (
        "preserve the order from the patch in a merging int list",
        {"mergingIntList": [1, 2, 3]},
        {"mergingIntList": [3, 1]},
        {"mergingIntList": [2, 3, 1]},
    ),
    (
        "$deleteFromPrimitiveList on empty primitive list should not add the item to the list",
        {"mergingIntList": None},
        {"$deleteFromPrimitiveList/mergingIntList": [3]},
        {"mergingIntList": None},
    ),
]


@pytest.mark.parametrize(
    ("original", "patch", "expected"), [c[1:] for c in UPSTREAM_CASES], ids=[c[0] for c in UPSTREAM_CASES]
)
def test_strategic_patch_matches_the_apimachinery_fixtures(
    monkeypatch: pytest.MonkeyPatch, original: Any, patch: Any, expected: Any
) -> None:
    for field in ("mergingList", "mergeItemPtr", "retainKeysMergingList"):
        monkeypatch.setitem(patch_module.MERGE_KEYS, field, "name")
    monkeypatch.setattr(patch_module, "PRIMITIVE_MERGE_LISTS", frozenset({"mergingIntList"}))
    # List order is part of the result: compare the JSON text, as the upstream test does.
    result = strategic_merge_patch(original, patch)
    assert json.dumps(result, sort_keys=True) == json.dumps(expected, sort_keys=True)


def test_kubectl_apply_style_patch_removes_and_adds_env_keeping_server_added_vars() -> None:
    target = _pod(
        {
            "name": "app",
            "env": [
                {"name": "ENV1", "value": "foo"},
                {"name": "ENV2", "value": "bar"},
                {"name": "ENV3", "value": "baz"},
                {"name": "SERVER", "value": "added"},
            ],
        }
    )
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "app"}],
            "containers": [
                {
                    "name": "app",
                    "$setElementOrder/env": [{"name": "ENV1"}, {"name": "ENV2"}, {"name": "ENV6"}],
                    "env": [{"name": "ENV3", "$patch": "delete"}, {"name": "ENV6", "value": "new"}],
                }
            ],
        }
    }
    env = strategic_merge_patch(target, patch)["spec"]["containers"][0]["env"]
    assert env == [
        {"name": "ENV1", "value": "foo"},
        {"name": "ENV2", "value": "bar"},
        {"name": "SERVER", "value": "added"},
        {"name": "ENV6", "value": "new"},
    ]


# ---------------------------------------------------------------------------------------------------
# apply_patch: the request body and its Content-Type


def test_apply_patch_dispatches_on_the_content_type() -> None:
    target = _pod({"name": "app", "image": "a"}, {"name": "side", "image": "s"})
    body = b'{"spec":{"containers":[{"name":"app","image":"b"}]}}'
    merged = apply_patch("application/merge-patch+json", target, body, strategic_allowed=True)
    strategic = apply_patch("application/strategic-merge-patch+json", target, body, strategic_allowed=True)
    assert merged["spec"]["containers"] == [{"name": "app", "image": "b"}]
    assert _names(strategic["spec"]["containers"]) == ["app", "side"]
    assert strategic["spec"]["containers"][0]["image"] == "b"
    json_body = b'[{"op":"replace","path":"/spec/containers/1/image","value":"t"}]'
    assert apply_patch("application/json-patch+json", target, json_body, strategic_allowed=False)["spec"][
        "containers"
    ][1] == {"name": "side", "image": "t"}


def test_apply_patch_accepts_media_type_parameters() -> None:
    result = apply_patch(
        "application/merge-patch+json; charset=utf-8", {"a": 1}, b'{"b":2}', strategic_allowed=False
    )
    assert result == {"a": 1, "b": 2}


def test_apply_patch_refuses_strategic_merge_for_custom_resources_with_415() -> None:
    err = _raises(apply_patch, "application/strategic-merge-patch+json", {}, b"{}", strategic_allowed=False)
    assert (err.code, err.reason) == (415, "UnsupportedMediaType")
    assert str(err) == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )


def test_apply_patch_answers_an_unknown_type_on_a_custom_resource_with_the_accepted_types() -> None:
    err = _raises(apply_patch, "application/json", {}, b"{}", strategic_allowed=False)
    assert (err.code, err.reason) == (415, "UnsupportedMediaType")
    assert str(err).endswith(", ".join(CUSTOM_RESOURCE_PATCH_TYPES))


def test_apply_patch_answers_an_unknown_type_on_a_built_in_resource_as_go_restful_does() -> None:
    err = _raises(apply_patch, "application/json", {}, b"{}", strategic_allowed=True)
    assert (err.code, err.reason) == (415, "")
    assert str(err) == "the server responded with the status code 415 but did not return more information"


def test_apply_patch_with_a_space_before_the_parameters_passes_routing_but_not_the_handler() -> None:
    err = _raises(
        apply_patch, "application/merge-patch+json ; charset=utf-8", {}, b"{}", strategic_allowed=True
    )
    assert (err.code, err.reason) == (415, "UnsupportedMediaType")
    assert str(err).endswith(", ".join(BUILTIN_PATCH_TYPES))


def test_apply_patch_leaves_server_side_apply_to_another_handler() -> None:
    err = _raises(apply_patch, "application/apply-patch+yaml", {}, b"{}", strategic_allowed=True)
    assert err.code == 415


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        ("application/json-patch+json", b"[{", "error decoding patch: unexpected end of JSON input"),
        (
            "application/merge-patch+json",
            b"{x}",
            "error decoding patch: invalid character 'x' looking for beginning of object key string",
        ),
        ("application/merge-patch+json", b"", "error decoding patch: unexpected end of JSON input"),
        ("application/strategic-merge-patch+json", b"{} x", "invalid character 'x' after top-level value"),
        (
            "application/strategic-merge-patch+json",
            b'{"a":tru}',
            "invalid character '}' in literal true (expecting 'e')",
        ),
    ],
)
def test_apply_patch_body_that_is_not_json_is_a_400(content_type: str, body: bytes, message: str) -> None:
    err = _raises(apply_patch, content_type, {"a": 1}, body, strategic_allowed=True)
    assert (err.code, err.reason, str(err)) == (400, "BadRequest", message)


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        ("application/merge-patch+json", b"[1]", f"error decoding patch: {NOT_A_MAP.format('array')}"),
        ("application/merge-patch+json", b'"x"', f"error decoding patch: {NOT_A_MAP.format('string')}"),
        ("application/merge-patch+json", b"null", "Invalid JSON Patch"),
        ("application/strategic-merge-patch+json", b"[1]", NOT_A_MAP.format("array")),
        ("application/json-patch+json", b'{"op":"add"}', f"error decoding patch: {NOT_OPS}"),
    ],
)
def test_apply_patch_body_of_the_wrong_shape_for_its_type_is_a_400(
    content_type: str, body: bytes, message: str
) -> None:
    err = _raises(apply_patch, content_type, {"a": 1}, body, strategic_allowed=True)
    assert (err.code, str(err)) == (400, message)


def test_apply_patch_json_patch_failure_is_a_422_with_the_generic_status_message() -> None:
    body = b'[{"op":"test","path":"/metadata/name","value":"other"}]'
    err = _raises(
        apply_patch, "application/json-patch+json", {"metadata": {"name": "p"}}, body, strategic_allowed=True
    )
    assert (err.code, err.reason, err.status_message) == (422, "Invalid", GENERIC_422)
    assert str(err) == "testing value /metadata/name failed: test failed"


def test_apply_patch_json_patch_that_leaves_no_object_is_a_422() -> None:
    body = b'[{"op":"replace","path":"","value":[1]}]'
    err = _raises(apply_patch, "application/json-patch+json", {"a": 1}, body, strategic_allowed=True)
    assert err.code == 422
    assert "cannot unmarshal array" in str(err)


def test_apply_patch_null_bodies_leave_the_object_unchanged_where_the_server_accepts_them() -> None:
    target = {"a": 1}
    assert apply_patch("application/json-patch+json", target, b"null", strategic_allowed=True) == target
    assert (
        apply_patch("application/strategic-merge-patch+json", target, b"null", strategic_allowed=True)
        == target
    )


def test_apply_patch_strategic_missing_merge_key_reaches_the_client_as_a_500() -> None:
    body = b'{"spec":{"containers":[{"image":"nginx:1.25"}]}}'
    err = _raises(
        apply_patch,
        "application/strategic-merge-patch+json",
        _pod({"name": "app"}),
        body,
        strategic_allowed=True,
    )
    assert (err.code, err.reason, err.status_message) == (
        500,
        "",
        "map: map[image:nginx:1.25] does not contain declared merge key: name",
    )


def test_apply_patch_does_not_modify_the_target() -> None:
    target = _pod({"name": "app"})
    before = copy.deepcopy(target)
    apply_patch(
        "application/strategic-merge-patch+json",
        target,
        b'{"metadata":{"labels":null}}',
        strategic_allowed=True,
    )
    apply_patch(
        "application/merge-patch+json", target, b'{"metadata":{"labels":null}}', strategic_allowed=True
    )
    assert target == before
