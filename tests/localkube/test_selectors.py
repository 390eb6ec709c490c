"""Label and field selectors behave (and fail) exactly like kube-apiserver's."""

from __future__ import annotations

from typing import Any

import pytest

from localkube.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    escape_field_value,
    label_selector_from_dict,
    object_fields,
    parse_field_selector,
    parse_label_selector,
    supported_fields,
)

# Upstream's exact validation texts (note the double space before "or", which upstream really emits).
QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
    "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def label_error(text: str) -> str:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    return str(info.value)


def field_error(text: str, kind: str = "Pod", **kwargs: Any) -> str:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text, supported_fields(kind), **kwargs)
    return str(info.value)


def dict_error(sel: dict[str, Any]) -> str:
    with pytest.raises(SelectorError) as info:
        label_selector_from_dict(sel)
    return str(info.value)


# ------------------------------------------------------------------------------------------------
# Label selector syntax and matching
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\t\r\n"])
def test_empty_selector_matches_everything(text: str) -> None:
    sel = parse_label_selector(text)
    assert sel.is_empty()
    assert sel.matches({})
    assert sel.matches(None)
    assert sel.matches({"app": "web"})
    assert str(sel) == ""


def test_equals_matches_only_the_exact_value() -> None:
    sel = parse_label_selector("app=web")
    assert not sel.is_empty()
    assert sel.matches({"app": "web", "tier": "front"})
    assert not sel.matches({"app": "db"})
    assert not sel.matches({})
    assert not sel.matches(None)


def test_double_equals_is_the_same_as_equals() -> None:
    sel = parse_label_selector("app==web")
    assert sel.matches({"app": "web"})
    assert not sel.matches({"app": "webx"})
    assert str(sel) == "app==web"


def test_not_equals_matches_objects_without_the_key() -> None:
    sel = parse_label_selector("app!=web")
    assert sel.matches({})
    assert sel.matches(None)
    assert sel.matches({"app": "db"})
    assert not sel.matches({"app": "web"})


def test_in_matches_any_listed_value() -> None:
    sel = parse_label_selector("env in (prod,staging)")
    assert sel.matches({"env": "prod"})
    assert sel.matches({"env": "staging"})
    assert not sel.matches({"env": "dev"})
    assert not sel.matches({})


def test_notin_matches_objects_without_the_key() -> None:
    sel = parse_label_selector("env notin (prod,staging)")
    assert sel.matches({})
    assert sel.matches({"env": "dev"})
    assert not sel.matches({"env": "prod"})
    assert not sel.matches({"env": "staging"})


def test_bare_key_requires_the_label_to_exist_with_any_value() -> None:
    sel = parse_label_selector("app")
    assert sel.matches({"app": ""})
    assert sel.matches({"app": "anything"})
    assert not sel.matches({"other": "x"})


def test_bang_key_requires_the_label_to_be_absent() -> None:
    sel = parse_label_selector("!app")
    assert sel.matches({})
    assert sel.matches({"other": "x"})
    assert not sel.matches({"app": ""})
    assert str(sel) == "!app"


def test_comma_is_a_logical_and() -> None:
    sel = parse_label_selector("app=web,tier,!legacy,env notin (dev)")
    assert sel.matches({"app": "web", "tier": "front"})
    assert not sel.matches({"app": "web"})
    assert not sel.matches({"app": "web", "tier": "front", "legacy": "1"})
    assert not sel.matches({"app": "web", "tier": "front", "env": "dev"})


def test_whitespace_around_tokens_is_ignored() -> None:
    sel = parse_label_selector("  app  =  web ,\ttier   in ( a ,  b ) ,\n! legacy , env  ")
    assert str(sel) == "app=web,env,!legacy,tier in (a,b)"
    assert sel.matches({"app": "web", "tier": "b", "env": "x"})
    assert not sel.matches({"app": "web", "tier": "c", "env": "x"})


def test_operators_need_no_surrounding_whitespace() -> None:
    sel = parse_label_selector("a!=b,c==d,e in(f),g notin(h)")
    assert sel.matches({"c": "d", "e": "f"})
    assert not sel.matches({"a": "b", "c": "d", "e": "f"})


def test_missing_value_after_equals_means_the_empty_value() -> None:
    sel = parse_label_selector("app=,tier!=")
    assert sel.matches({"app": "", "tier": "x"})
    assert not sel.matches({"app": "web"})
    assert not sel.matches({"app": "", "tier": ""})


def test_empty_parentheses_mean_the_empty_value() -> None:
    sel = parse_label_selector("app in ()")
    assert sel.matches({"app": ""})
    assert not sel.matches({"app": "web"})
    assert not sel.matches({})


def test_empty_members_in_a_set_mean_the_empty_value() -> None:
    sel = parse_label_selector("x in (foo,,baz)")
    assert sel.requirements[0].values == ("", "baz", "foo")
    assert sel.matches({"x": ""})
    assert sel.matches({"x": "baz"})
    assert not sel.matches({"x": "bar"})
    assert parse_label_selector("x in (,a)").requirements[0].values == ("", "a")
    assert parse_label_selector("x in (a,)").requirements[0].values == ("", "a")


def test_in_and_notin_are_keywords_only_in_operator_position() -> None:
    sel = parse_label_selector("in in (notin,in),notin=in")
    assert sel.matches({"in": "notin", "notin": "in"})
    assert not sel.matches({"in": "x", "notin": "in"})


def test_greater_than_and_less_than_compare_integers() -> None:
    gt = parse_label_selector("replicas>3")
    assert gt.matches({"replicas": "4"})
    assert gt.matches({"replicas": "10"})  # numeric, not lexicographic
    assert not gt.matches({"replicas": "3"})
    lt = parse_label_selector("replicas<3")
    assert lt.matches({"replicas": "-7"})
    assert lt.matches({"replicas": "2"})
    assert not lt.matches({"replicas": "3"})
    assert str(gt) == "replicas>3"


def test_greater_than_never_matches_missing_or_non_integer_labels() -> None:
    sel = parse_label_selector("replicas>3")
    assert not sel.matches({})
    assert not sel.matches({"replicas": "many"})
    assert not sel.matches({"replicas": "4.5"})
    assert not sel.matches({"replicas": "99999999999999999999"})  # overflows int64 like Go's ParseInt


def test_greater_than_requires_an_integer_value() -> None:
    assert label_error("a>abc") == (
        "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, "
        "the value must be an integer"
    )


def test_greater_than_with_a_negative_value_is_rejected_as_a_label_value_like_upstream() -> None:
    assert label_error("a>-1") == (
        f'unable to parse requirement: values[0][a]: Invalid value: "-1": {VALUE_MSG}'
    )


def test_several_validation_errors_are_aggregated_in_brackets() -> None:
    assert label_error("a<b_") == (
        "unable to parse requirement: [values[0]: Invalid value: \"b_\": for 'Gt', 'Lt' operators, the "
        f'value must be an integer, values[0][a]: Invalid value: "b_": {VALUE_MSG}]'
    )


def test_greater_or_equal_is_not_an_operator() -> None:
    assert label_error("a>=1") == "unable to parse requirement: found '=', expected: identifier"


def test_prefixed_keys_are_accepted() -> None:
    sel = parse_label_selector("app.kubernetes.io/name=web,example.com/tier")
    assert sel.matches({"app.kubernetes.io/name": "web", "example.com/tier": "x"})
    assert not sel.matches({"name": "web", "tier": "x"})


def test_key_with_invalid_characters_is_rejected_with_the_upstream_message() -> None:
    assert label_error("a$b=c") == (
        f'unable to parse requirement: <nil>: Invalid value: "a$b": name part {QNAME_MSG}'
    )


def test_key_with_an_uppercase_prefix_is_rejected() -> None:
    assert label_error("Example.com/app=x") == (
        f'unable to parse requirement: <nil>: Invalid value: "Example.com/app": prefix part {SUBDOMAIN_MSG}'
    )


def test_key_with_an_empty_prefix_is_rejected() -> None:
    assert label_error("/app") == (
        'unable to parse requirement: <nil>: Invalid value: "/app": prefix part must be non-empty'
    )


def test_key_with_an_empty_name_reports_both_upstream_complaints() -> None:
    assert label_error("example.com/") == (
        'unable to parse requirement: <nil>: Invalid value: "example.com/": name part must be non-empty; '
        f"name part {QNAME_MSG}"
    )


def test_key_with_two_slashes_is_rejected() -> None:
    assert label_error("a/b/c") == (
        'unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name '
        f"{QNAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    )


def test_key_name_longer_than_63_characters_is_rejected() -> None:
    key = "k" * 64
    assert parse_label_selector("k" * 63).matches({"k" * 63: "x"})
    assert label_error(key) == (
        f'unable to parse requirement: <nil>: Invalid value: "{key}": name part must be no more than 63 '
        "characters"
    )


def test_value_longer_than_63_characters_is_rejected() -> None:
    value = "v" * 64
    assert parse_label_selector("a=" + "v" * 63).matches({"a": "v" * 63})
    assert label_error("a=" + value) == (
        f'unable to parse requirement: values[0][a]: Invalid value: "{value}": must be no more than 63 '
        "characters"
    )


def test_value_with_invalid_characters_is_rejected() -> None:
    assert label_error("a=b$") == (
        f'unable to parse requirement: values[0][a]: Invalid value: "b$": {VALUE_MSG}'
    )
    assert label_error("a in (ok,-bad)") == (
        f'unable to parse requirement: values[0][a]: Invalid value: "-bad": {VALUE_MSG}'
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        ("a=b,", "found '', expected: identifier after ','"),
        ("a=b,,c", "found ',', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in", "unable to parse requirement: found '' expected: '('"),
        ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (,", "unable to parse requirement: found '', expected: ',', or identifier"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("a notin", "unable to parse requirement: found '' expected: '('"),
    ],
)
def test_syntax_errors_carry_the_upstream_message(text: str, message: str) -> None:
    assert label_error(text) == message


def test_selector_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_label_selector("a b")


def test_string_form_is_sorted_by_key_with_sorted_values() -> None:
    sel = parse_label_selector("zone notin (b,a),app in (y,x),!gone,tier")
    assert str(sel) == "app in (x,y),!gone,tier,zone notin (a,b)"
    assert parse_label_selector(str(sel)) == sel


def test_requires_exact_match_reports_a_pinned_value() -> None:
    sel = parse_label_selector("app=web,env in (prod),tier in (a,b),x!=y")
    assert sel.requires_exact_match("app") == "web"
    assert sel.requires_exact_match("env") == "prod"
    assert sel.requires_exact_match("tier") is None
    assert sel.requires_exact_match("x") is None
    assert sel.requires_exact_match("missing") is None


# ------------------------------------------------------------------------------------------------
# metav1.LabelSelector (dict form)
# ------------------------------------------------------------------------------------------------


def test_none_dict_selector_matches_nothing() -> None:
    sel = label_selector_from_dict(None)
    assert not sel.is_empty()
    assert sel.is_nothing()
    assert not sel.matches({})
    assert not sel.matches({"app": "web"})


@pytest.mark.parametrize("raw", [{}, {"matchLabels": {}}, {"matchLabels": None, "matchExpressions": []}])
def test_empty_dict_selector_matches_everything(raw: dict[str, Any]) -> None:
    sel = label_selector_from_dict(raw)
    assert sel.is_empty()
    assert sel.matches({})
    assert sel.matches({"app": "web"})


def test_match_labels_require_every_pair() -> None:
    sel = label_selector_from_dict({"matchLabels": {"app": "web", "tier": "front"}})
    assert sel.matches({"app": "web", "tier": "front", "extra": "1"})
    assert not sel.matches({"app": "web"})
    assert not sel.matches({"app": "web", "tier": "back"})


def test_match_expressions_support_all_four_operators() -> None:
    sel = label_selector_from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "staging"]},
                {"key": "zone", "operator": "NotIn", "values": ["z1"]},
                {"key": "tier", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        }
    )
    assert sel.matches({"app": "web", "env": "prod", "tier": ""})
    assert sel.matches({"app": "web", "env": "staging", "tier": "x", "zone": "z2"})
    assert not sel.matches({"app": "web", "env": "dev", "tier": "x"})
    assert not sel.matches({"app": "web", "env": "prod", "tier": "x", "zone": "z1"})
    assert not sel.matches({"app": "web", "env": "prod"})
    assert not sel.matches({"app": "web", "env": "prod", "tier": "x", "legacy": "y"})
    assert not sel.matches({"env": "prod", "tier": "x"})


def test_dict_notin_matches_objects_without_the_key() -> None:
    sel = label_selector_from_dict(
        {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["a"]}]}
    )
    assert sel.matches({})
    assert not sel.matches({"env": "a"})


def test_dict_selector_rejects_an_unknown_operator() -> None:
    assert dict_error({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}) == (
        '"Gt" is not a valid label selector operator'
    )
    assert dict_error({"matchExpressions": [{"key": "a", "operator": "in", "values": ["1"]}]}) == (
        '"in" is not a valid label selector operator'
    )


def test_dict_selector_rejects_values_for_exists() -> None:
    assert dict_error({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}) == (
        'values: Invalid value: ["x"]: values set must be empty for exists and does not exist'
    )


def test_dict_selector_rejects_in_without_values() -> None:
    assert dict_error({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}) == (
        "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
    )


def test_dict_selector_rejects_an_invalid_key() -> None:
    assert dict_error({"matchLabels": {"bad key": "x"}}) == (
        f'key: Invalid value: "bad key": name part {QNAME_MSG}'
    )


def test_dict_selector_rejects_an_invalid_value() -> None:
    assert dict_error({"matchLabels": {"app": "bad value"}}) == (
        f'values[0][app]: Invalid value: "bad value": {VALUE_MSG}'
    )


def test_dict_selector_rejects_non_string_label_values() -> None:
    with pytest.raises(SelectorError):
        label_selector_from_dict({"matchLabels": {"app": 3}})


# ------------------------------------------------------------------------------------------------
# Field selectors
# ------------------------------------------------------------------------------------------------


def test_empty_field_selector_matches_everything() -> None:
    sel = parse_field_selector("", supported_fields("Pod"))
    assert sel.is_empty()
    assert sel.matches({})
    assert sel.keys() == set()
    assert parse_field_selector(",,", supported_fields("Pod")).is_empty()


def test_field_equality_in_all_spellings() -> None:
    fields = {"metadata.name": "web-1", "metadata.namespace": "default"}
    for text in ("metadata.name=web-1", "metadata.name==web-1"):
        sel = parse_field_selector(text, supported_fields("Pod"))
        assert sel.matches(fields)
        assert not sel.matches({"metadata.name": "web-2"})
    neq = parse_field_selector("metadata.name!=web-1", supported_fields("Pod"))
    assert not neq.matches(fields)
    assert neq.matches({"metadata.name": "web-2"})


def test_field_terms_are_anded() -> None:
    sel = parse_field_selector("status.phase=Running,spec.nodeName!=node-a", supported_fields("Pod"))
    assert sel.keys() == {"status.phase", "spec.nodeName"}
    assert sel.matches({"status.phase": "Running", "spec.nodeName": "node-b"})
    assert not sel.matches({"status.phase": "Running", "spec.nodeName": "node-a"})
    assert not sel.matches({"status.phase": "Pending", "spec.nodeName": "node-b"})


def test_a_field_missing_from_the_object_reads_as_empty() -> None:
    sel = parse_field_selector("spec.nodeName=", supported_fields("Pod"))
    assert sel.matches({})
    assert not sel.matches({"spec.nodeName": "node-a"})
    assert parse_field_selector("spec.nodeName!=", supported_fields("Pod")).matches({"spec.nodeName": "n"})


def test_field_values_may_escape_comma_equals_and_backslash() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b\=c\\d", supported_fields("Pod"))
    assert sel.requirements[0].value == "a,b=c\\d"
    assert sel.matches({"metadata.name": "a,b=c\\d"})
    assert str(sel) == r"metadata.name=a\,b\=c\\d"


def test_escaped_comma_does_not_split_terms() -> None:
    sel = parse_field_selector(r"metadata.name=x\,y,metadata.namespace=ns", supported_fields("Pod"))
    assert len(sel.requirements) == 2
    assert sel.matches({"metadata.name": "x,y", "metadata.namespace": "ns"})


def test_escape_field_value_round_trips() -> None:
    raw = "a,b=c\\d"
    sel = parse_field_selector("metadata.name=" + escape_field_value(raw), supported_fields("Pod"))
    assert sel.matches({"metadata.name": raw})


def test_unknown_escape_sequence_is_rejected() -> None:
    assert field_error(r"metadata.name=a\b") == "invalid field selector: invalid escape sequence: \\b"


def test_trailing_backslash_is_rejected() -> None:
    assert field_error("metadata.name=a\\") == "invalid field selector: invalid escape sequence: \\"


def test_unescaped_equals_in_a_value_is_reported_by_code_point_like_upstream() -> None:
    assert field_error("metadata.name=a=b") == "invalid field selector: unescaped character in value: 61"
    assert field_error("metadata.name===b") == "invalid field selector: unescaped character in value: 61"


def test_term_without_operator_is_rejected() -> None:
    assert (
        field_error("metadata.name") == "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
    )
    assert field_error("status.phase=Running,oops") == (
        "invalid selector: 'status.phase=Running,oops'; can't understand 'oops'"
    )


def test_unsupported_field_uses_the_real_server_message() -> None:
    assert field_error("spec.containers=x") == "field label not supported: spec.containers"
    assert field_error("metadata.namespace=x", kind="Namespace") == (
        "field label not supported: metadata.namespace"
    )


def test_field_selectors_do_not_trim_whitespace() -> None:
    assert field_error("metadata.name = web") == "field label not supported: metadata.name "


def test_unsupported_fields_are_reported_in_sorted_term_order() -> None:
    assert field_error("zzz=1,aaa=2") == "field label not supported: aaa"


def test_syntax_errors_win_over_unsupported_fields() -> None:
    assert field_error("aaa=1,zzz") == "invalid selector: 'aaa=1,zzz'; can't understand 'zzz'"


def test_builtin_kind_without_conversion_gets_the_default_conversion_message() -> None:
    with pytest.raises(SelectorError) as info:
        parse_field_selector("data.x=1", supported_fields("ConfigMap"), kind="ConfigMap")
    assert str(info.value) == (
        '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )
    with pytest.raises(SelectorError) as info:
        parse_field_selector("spec.x=1", supported_fields("Pod"), kind="Pod")
    assert str(info.value) == "field label not supported: spec.x"


def test_custom_resources_accept_only_the_fields_they_are_given() -> None:
    sel = parse_field_selector("metadata.name=a", {"metadata.name"})
    assert sel.matches({"metadata.name": "a"})
    with pytest.raises(SelectorError, match=r"^field label not supported: metadata\.namespace$"):
        parse_field_selector("metadata.namespace=a", {"metadata.name"})


def test_spec_host_is_an_alias_of_spec_node_name_for_pods() -> None:
    sel = parse_field_selector("spec.host=node-a", supported_fields("Pod"))
    assert sel.keys() == {"spec.nodeName"}
    assert sel.matches({"spec.nodeName": "node-a"})
    assert field_error("spec.host=node-a", kind="Secret") == "field label not supported: spec.host"


def test_field_requires_exact_match_only_for_equality_terms() -> None:
    sel = parse_field_selector("metadata.name=a,spec.nodeName!=b", supported_fields("Pod"))
    assert sel.requires_exact_match("metadata.name") == "a"
    assert sel.requires_exact_match("spec.nodeName") is None
    assert sel == parse_field_selector("spec.nodeName!=b,metadata.name==a", supported_fields("Pod"))
    assert isinstance(sel, FieldSelector)


# ------------------------------------------------------------------------------------------------
# Selectable fields per kind
# ------------------------------------------------------------------------------------------------


def test_pod_fields_are_the_ones_the_real_server_exposes() -> None:
    pod = {
        "metadata": {"name": "web-1", "namespace": "prod"},
        "spec": {
            "nodeName": "node-a",
            "restartPolicy": "Never",
            "schedulerName": "custom",
            "serviceAccountName": "robot",
            "hostNetwork": True,
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.5",
            "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}],
            "nominatedNodeName": "node-b",
        },
    }
    assert object_fields(pod, "Pod") == {
        "metadata.name": "web-1",
        "metadata.namespace": "prod",
        "spec.nodeName": "node-a",
        "spec.restartPolicy": "Never",
        "spec.schedulerName": "custom",
        "spec.serviceAccountName": "robot",
        "spec.hostNetwork": "true",
        "status.phase": "Running",
        "status.podIP": "10.0.0.5",
        "status.nominatedNodeName": "node-b",
    }


def test_pod_fields_fall_back_to_api_defaults() -> None:
    fields = object_fields({"metadata": {"name": "p", "namespace": "ns"}}, "Pod")
    assert fields["spec.restartPolicy"] == "Always"
    assert fields["spec.schedulerName"] == "default-scheduler"
    assert fields["spec.hostNetwork"] == "false"
    assert fields["status.phase"] == "Pending"
    assert fields["spec.nodeName"] == ""
    assert fields["status.podIP"] == ""


def test_pod_ip_falls_back_to_the_first_pod_ips_entry() -> None:
    pod = {"metadata": {"name": "p"}, "status": {"podIPs": [{"ip": "10.1.1.1"}]}}
    assert object_fields(pod, "Pod")["status.podIP"] == "10.1.1.1"


def test_field_selector_matches_a_pod_through_object_fields() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
    fields = object_fields(pod, "Pod")
    assert parse_field_selector("spec.nodeName=n1,status.phase=Pending", supported_fields("Pod")).matches(
        fields
    )
    assert parse_field_selector("status.podIPs=", supported_fields("Pod")).matches(fields)
    assert not parse_field_selector("metadata.namespace=other", supported_fields("Pod")).matches(fields)


def test_event_fields_are_the_ones_the_real_server_exposes() -> None:
    event = {
        "metadata": {"name": "web.17a", "namespace": "prod"},
        "involvedObject": {
            "kind": "Pod",
            "namespace": "prod",
            "name": "web",
            "uid": "u-1",
            "apiVersion": "v1",
            "resourceVersion": "42",
            "fieldPath": "spec.containers{app}",
        },
        "reason": "Started",
        "reportingComponent": "kubelet",
        "source": {"component": "kubelet-src"},
        "type": "Normal",
    }
    assert object_fields(event, "Event") == {
        "metadata.name": "web.17a",
        "metadata.namespace": "prod",
        "involvedObject.kind": "Pod",
        "involvedObject.namespace": "prod",
        "involvedObject.name": "web",
        "involvedObject.uid": "u-1",
        "involvedObject.apiVersion": "v1",
        "involvedObject.resourceVersion": "42",
        "involvedObject.fieldPath": "spec.containers{app}",
        "reason": "Started",
        "reportingComponent": "kubelet",
        "source": "kubelet-src",
        "type": "Normal",
    }
    assert set(object_fields(event, "Event")) == supported_fields("Event")


def test_event_source_falls_back_to_the_reporting_component() -> None:
    event = {"metadata": {"name": "e", "namespace": "ns"}, "reportingComponent": "my-controller"}
    fields = object_fields(event, "Event")
    assert fields["source"] == "my-controller"
    assert fields["involvedObject.name"] == ""
    sel = parse_field_selector("source=my-controller,involvedObject.kind=", supported_fields("Event"))
    assert sel.matches(fields)


def test_cluster_scoped_objects_have_an_empty_namespace() -> None:
    node = object_fields({"metadata": {"name": "node-a"}, "spec": {"unschedulable": True}}, "Node")
    assert node == {"metadata.name": "node-a", "metadata.namespace": "", "spec.unschedulable": "true"}
    namespace = object_fields({"metadata": {"name": "prod"}}, "Namespace")
    assert namespace == {"metadata.name": "prod", "metadata.namespace": "", "status.phase": "Active"}
    other = object_fields({"metadata": {"name": "admin"}}, "ClusterRole")
    assert other == {"metadata.name": "admin", "metadata.namespace": ""}


def test_secret_job_and_service_fields() -> None:
    assert object_fields({"metadata": {"name": "s", "namespace": "n"}}, "Secret")["type"] == "Opaque"
    tls = {"metadata": {"name": "s", "namespace": "n"}, "type": "kubernetes.io/tls"}
    assert object_fields(tls, "Secret")["type"] == "kubernetes.io/tls"
    job = {"metadata": {"name": "j", "namespace": "n"}, "status": {"succeeded": 2}}
    assert object_fields(job, "Job")["status.successful"] == "2"
    assert object_fields({"metadata": {"name": "j"}}, "Job")["status.successful"] == "0"
    svc = object_fields({"metadata": {"name": "s"}, "spec": {"clusterIP": "None"}}, "Service")
    assert svc["spec.clusterIP"] == "None"
    assert svc["spec.type"] == "ClusterIP"


def test_supported_fields_follow_each_kinds_conversion_function() -> None:
    assert supported_fields("Pod") >= {"metadata.name", "metadata.namespace", "status.phase", "spec.nodeName"}
    assert supported_fields("Secret") == {"metadata.name", "metadata.namespace", "type"}
    assert supported_fields("Job") == {"metadata.name", "metadata.namespace", "status.successful"}
    assert supported_fields("Namespace") == {"metadata.name", "status.phase"}
    assert supported_fields("Node") == {"metadata.name", "spec.unschedulable"}
    assert supported_fields("ConfigMap") == {"metadata.name", "metadata.namespace"}
    assert isinstance(supported_fields("Pod"), frozenset)


def test_every_field_object_fields_returns_is_selectable_except_the_cluster_scoped_namespace() -> None:
    for kind in ("Pod", "Event", "Secret", "Job", "Service", "ReplicationController", "ConfigMap"):
        assert set(object_fields({"metadata": {"name": "x"}}, kind)) <= supported_fields(kind)
    for kind in ("Namespace", "Node"):
        assert set(object_fields({"metadata": {"name": "x"}}, kind)) - supported_fields(kind) == {
            "metadata.namespace"
        }


def test_label_selector_equality_ignores_requirement_order() -> None:
    assert parse_label_selector("b=1,a=2") == parse_label_selector("a=2, b=1")
    assert isinstance(parse_label_selector("a"), LabelSelector)
