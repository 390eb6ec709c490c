"""Tests for localkube.schema: structural defaulting, pruning and validation of custom resources.

Expected strings are the ones kube-apiserver prints (field.Error.Error() / StatusCause messages).
"""

from __future__ import annotations

import copy
from typing import Any

from localkube.schema import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    TYPE_INVALID,
    FieldError,
    apply_defaults,
    check_structural,
    format_invalid,
    json_path_get,
    prune,
    prune_nulls,
    validate,
    validate_custom_resource,
)

# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def obj(**props: Any) -> dict[str, Any]:
    """An object schema with the given properties."""
    return {"type": "object", "properties": props}


def spec_schema(**props: Any) -> dict[str, Any]:
    return obj(spec=obj(**props))


def strs(errors: list[FieldError]) -> list[str]:
    return [str(e) for e in errors]


def check(value: Any, schema: dict[str, Any], root: str = "spec") -> list[str]:
    return strs(validate(value, schema, root_path=root))


STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}


# --------------------------------------------------------------------------------------------------
# FieldError
# --------------------------------------------------------------------------------------------------


def test_field_error_str_is_field_then_message() -> None:
    e = FieldError("spec.task", REQUIRED, "Required value")
    assert str(e) == "spec.task: Required value"


def test_reason_constants_are_the_metav1_cause_types() -> None:
    assert (REQUIRED, INVALID, TYPE_INVALID, NOT_SUPPORTED, DUPLICATE, FORBIDDEN, TOO_LONG, TOO_MANY) == (
        "FieldValueRequired",
        "FieldValueInvalid",
        "FieldValueTypeInvalid",
        "FieldValueNotSupported",
        "FieldValueDuplicate",
        "FieldValueForbidden",
        "FieldValueTooLong",
        "FieldValueTooMany",
    )


def test_field_error_is_immutable_and_comparable() -> None:
    assert FieldError("a", REQUIRED, "Required value") == FieldError("a", REQUIRED, "Required value")
    assert hash(FieldError("a", REQUIRED, "x")) == hash(FieldError("a", REQUIRED, "x"))


# --------------------------------------------------------------------------------------------------
# required / type / nullable
# --------------------------------------------------------------------------------------------------


def test_missing_required_field_is_reported_with_its_path() -> None:
    schema = {"type": "object", "required": ["task"], "properties": {"task": STR}}
    errors = validate({}, schema, root_path="spec")
    assert errors == [FieldError("spec.task", REQUIRED, "Required value")]


def test_required_at_the_root_has_no_leading_dot() -> None:
    schema = {"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object"}}}
    assert strs(validate({}, schema)) == ["spec: Required value"]


def test_required_in_array_items_uses_bracket_index() -> None:
    schema = spec_schema(
        lifecycle=obj(
            postRun={
                "type": "array",
                "items": {"type": "object", "required": ["name"], "properties": {"name": STR}},
            }
        )
    )
    errors = validate({"spec": {"lifecycle": {"postRun": [{"name": "a"}, {}]}}}, schema)
    assert strs(errors) == ["spec.lifecycle.postRun[1].name: Required value"]


def test_present_null_satisfies_required_but_fails_the_type() -> None:
    schema = {"type": "object", "required": ["task"], "properties": {"task": STR}}
    errors = validate({"task": None}, schema, root_path="spec")
    assert strs(errors) == [
        'spec.task: Invalid value: "null": spec.task in body must be of type string: "null"'
    ]
    assert errors[0].reason == TYPE_INVALID


def test_wrong_type_reports_the_observed_json_type() -> None:
    errors = validate({"timeout": 30}, obj(timeout=STR), root_path="spec")
    assert errors == [
        FieldError(
            "spec.timeout",
            TYPE_INVALID,
            'Invalid value: "integer": spec.timeout in body must be of type string: "integer"',
        )
    ]


def test_each_json_type_is_named_like_the_server_names_it() -> None:
    schema = obj(a=STR, b=STR, c=STR, d=STR, e=INT)
    errors = check({"a": 1.5, "b": True, "c": [1], "d": {"x": 1}, "e": "x"}, schema)
    assert errors == [
        'spec.a: Invalid value: "number": spec.a in body must be of type string: "number"',
        'spec.b: Invalid value: "boolean": spec.b in body must be of type string: "boolean"',
        'spec.c: Invalid value: "array": spec.c in body must be of type string: "array"',
        'spec.d: Invalid value: "object": spec.d in body must be of type string: "object"',
        'spec.e: Invalid value: "string": spec.e in body must be of type integer: "string"',
    ]


def test_nullable_field_accepts_null() -> None:
    assert check({"a": None}, obj(a={"type": "string", "nullable": True})) == []


def test_untyped_field_accepts_anything() -> None:
    schema = obj(a={"x-kubernetes-preserve-unknown-fields": True})
    assert check({"a": None}, schema) == []
    assert check({"a": [1, {"b": 2}]}, schema) == []


def test_integral_float_is_accepted_where_integer_expected() -> None:
    assert check({"n": 3.0}, obj(n=INT)) == []


def test_fractional_float_is_rejected_where_integer_expected() -> None:
    assert check({"n": 3.5}, obj(n=INT)) == [
        'spec.n: Invalid value: "number": spec.n in body must be of type integer: "number"'
    ]


def test_bool_is_not_an_integer() -> None:
    assert check({"n": True}, obj(n=INT)) == [
        'spec.n: Invalid value: "boolean": spec.n in body must be of type integer: "boolean"'
    ]


def test_integer_is_accepted_where_number_expected() -> None:
    assert check({"n": 3}, obj(n=NUM)) == []


def test_boolean_type_accepts_bools_only() -> None:
    assert check({"b": False}, obj(b=BOOL)) == []
    assert check({"b": "false"}, obj(b=BOOL)) == [
        'spec.b: Invalid value: "string": spec.b in body must be of type boolean: "string"'
    ]


def test_all_applicable_validators_run_after_a_type_error() -> None:
    schema = obj(mode={"type": "string", "enum": ["a", "b"]})
    assert check({"mode": 5}, schema) == [
        'spec.mode: Invalid value: "integer": spec.mode in body must be of type string: "integer"',
        'spec.mode: Unsupported value: 5: supported values: "a", "b"',
    ]


def test_type_error_on_a_root_value_has_nil_field() -> None:
    errors = validate(5, STR)
    assert strs(errors) == ['<nil>: Invalid value: "integer":  in body must be of type string: "integer"']


# --------------------------------------------------------------------------------------------------
# enum
# --------------------------------------------------------------------------------------------------


def test_enum_violation_lists_supported_values() -> None:
    errors = validate(
        {"cleanup": "x"}, obj(cleanup={"type": "string", "enum": ["delete", "keep"]}), root_path="spec"
    )
    assert errors == [
        FieldError(
            "spec.cleanup", NOT_SUPPORTED, 'Unsupported value: "x": supported values: "delete", "keep"'
        )
    ]


def test_enum_of_non_strings_prints_their_json_quoted() -> None:
    schema = obj(level={"type": "integer", "enum": [1, 2.0, True, None]})
    assert check({"level": 7}, schema) == [
        'spec.level: Unsupported value: 7: supported values: "1", "2", "true", "null"'
    ]


def test_enum_compares_numbers_by_value() -> None:
    schema = obj(level={"type": "number", "enum": [1, 2.5]})
    assert check({"level": 1.0}, schema) == []
    assert check({"level": 2.5}, schema) == []


def test_enum_never_confuses_bools_with_numbers() -> None:
    schema = obj(flag={"enum": [1]})
    assert check({"flag": True}, schema) == ['spec.flag: Unsupported value: true: supported values: "1"']


def test_enum_matches_objects_structurally() -> None:
    schema = obj(o={"type": "object", "x-kubernetes-preserve-unknown-fields": True, "enum": [{"a": 1}]})
    assert check({"o": {"a": 1}}, schema) == []
    assert check({"o": {"a": 2}}, schema) == [
        'spec.o: Unsupported value: {"a":2}: supported values: "{\\"a\\":1}"'
    ]


def test_null_passes_an_enum_only_when_null_is_listed() -> None:
    listed = obj(a={"type": "string", "nullable": True, "enum": ["x", None]})
    unlisted = obj(a={"type": "string", "nullable": True, "enum": ["x"]})
    assert check({"a": None}, listed) == []
    assert check({"a": None}, unlisted) == ['spec.a: Unsupported value: null: supported values: "x"']


# --------------------------------------------------------------------------------------------------
# strings: pattern, length
# --------------------------------------------------------------------------------------------------


def test_pattern_mismatch_quotes_the_pattern() -> None:
    errors = validate({"name": "abc1"}, obj(name={"type": "string", "pattern": "^[a-z]+$"}), root_path="spec")
    assert errors == [
        FieldError("spec.name", INVALID, "Invalid value: \"abc1\": spec.name in body should match '^[a-z]+$'")
    ]


def test_pattern_is_searched_not_anchored() -> None:
    assert check({"name": "xx-abc-yy"}, obj(name={"type": "string", "pattern": "abc"})) == []


def test_pattern_dollar_does_not_match_before_a_trailing_newline() -> None:
    assert check({"name": "abc\n"}, obj(name={"type": "string", "pattern": "^[a-z]+$"})) == [
        "spec.name: Invalid value: \"abc\\n\": spec.name in body should match '^[a-z]+$'"
    ]


def test_pattern_classes_are_ascii_like_re2() -> None:
    schema = obj(n={"type": "string", "pattern": r"^\d+$"})
    assert check({"n": "123"}, schema) == []
    assert len(check({"n": "١٢٣"}, schema)) == 1  # Arabic-Indic digits are not \d in RE2


def test_pattern_posix_classes_are_supported() -> None:
    schema = obj(n={"type": "string", "pattern": "^[[:alpha:]][[:alnum:]_-]*$"})
    assert check({"n": "a1_b-c"}, schema) == []
    assert len(check({"n": "1abc"}, schema)) == 1


def test_pattern_unicode_letter_class_is_supported() -> None:
    schema = obj(n={"type": "string", "pattern": r"^\p{L}+$"})
    assert check({"n": "héllo"}, schema) == []
    assert len(check({"n": "h3llo"}, schema)) == 1


def test_min_length_violation_shows_the_value() -> None:
    errors = validate({"name": ""}, obj(name={"type": "string", "minLength": 1}), root_path="spec")
    assert errors == [
        FieldError(
            "spec.name", INVALID, 'Invalid value: "": spec.name in body should be at least 1 chars long'
        )
    ]


def test_max_length_violation_is_too_long_without_the_value() -> None:
    errors = validate({"name": "abcd"}, obj(name={"type": "string", "maxLength": 3}), root_path="spec")
    assert errors == [FieldError("spec.name", TOO_LONG, "Too long: may not be more than 3 bytes")]


def test_max_length_of_one_is_singular() -> None:
    assert check({"c": "ab"}, obj(c={"type": "string", "maxLength": 1})) == [
        "spec.c: Too long: may not be more than 1 byte"
    ]


def test_length_counts_characters_not_bytes() -> None:
    assert check({"name": "ééé"}, obj(name={"type": "string", "maxLength": 3})) == []


def test_only_the_first_string_violation_is_reported() -> None:
    schema = obj(name={"type": "string", "maxLength": 2, "pattern": "^[0-9]+$"})
    assert check({"name": "abcd"}, schema) == ["spec.name: Too long: may not be more than 2 bytes"]


def test_string_values_are_go_quoted_in_messages() -> None:
    schema = obj(s={"type": "string", "pattern": "^x$"})
    assert check({"s": 'a"b\tc\x01'}, schema) == [
        'spec.s: Invalid value: "a\\"b\\tc\\x01": spec.s in body should match \'^x$\''
    ]


# --------------------------------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------------------------------


def test_minimum_violation() -> None:
    errors = validate({"replicas": 0}, obj(replicas={"type": "integer", "minimum": 1}), root_path="spec")
    assert errors == [
        FieldError(
            "spec.replicas",
            INVALID,
            "Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
        )
    ]


def test_maximum_violation() -> None:
    assert check({"r": 11}, obj(r={"type": "integer", "maximum": 10})) == [
        "spec.r: Invalid value: 11: spec.r in body should be less than or equal to 10"
    ]


def test_exclusive_bounds_reject_the_bound_itself() -> None:
    schema = obj(
        r={"type": "integer", "minimum": 1, "exclusiveMinimum": True, "maximum": 5, "exclusiveMaximum": True}
    )
    assert check({"r": 3}, schema) == []
    assert check({"r": 1}, schema) == ["spec.r: Invalid value: 1: spec.r in body should be greater than 1"]
    assert check({"r": 5}, schema) == ["spec.r: Invalid value: 5: spec.r in body should be less than 5"]


def test_float_values_and_bounds_print_like_go() -> None:
    schema = obj(x={"type": "number", "maximum": 1000000})
    assert check({"x": 2000000.5}, schema) == [
        "spec.x: Invalid value: 2.0000005e+06: spec.x in body should be less than or equal to 1e+06"
    ]
    assert check({"x": 0.25}, obj(x={"type": "number", "minimum": 0.5})) == [
        "spec.x: Invalid value: 0.25: spec.x in body should be greater than or equal to 0.5"
    ]


def test_integer_data_compares_against_the_truncated_bound() -> None:
    # the server converts the bound to int64 for integer data: 1 >= int64(1.5) == 1
    assert check({"r": 1}, obj(r={"type": "integer", "minimum": 1.5})) == []


def test_multiple_of_violation() -> None:
    assert check({"n": 7}, obj(n={"type": "integer", "multipleOf": 5})) == [
        "spec.n: Invalid value: 7: spec.n in body should be a multiple of 5"
    ]
    assert check({"n": 10}, obj(n={"type": "integer", "multipleOf": 5})) == []


def test_multiple_of_with_fractional_factor() -> None:
    schema = obj(n={"type": "number", "multipleOf": 0.5})
    assert check({"n": 1.5}, schema) == []
    assert check({"n": 1.3}, schema) == [
        "spec.n: Invalid value: 1.3: spec.n in body should be a multiple of 0.5"
    ]


def test_negative_multiple_of_is_reported_as_must_be_positive() -> None:
    assert check({"n": 4}, obj(n={"type": "integer", "multipleOf": -2})) == [
        "spec.n: Invalid value: -2: factor MultipleOf declared for spec.n must be positive: -2"
    ]


def test_all_number_violations_are_reported() -> None:
    schema = obj(n={"type": "integer", "multipleOf": 2, "minimum": 10})
    assert check({"n": 3}, schema) == [
        "spec.n: Invalid value: 3: spec.n in body should be a multiple of 2",
        "spec.n: Invalid value: 3: spec.n in body should be greater than or equal to 10",
    ]


# --------------------------------------------------------------------------------------------------
# arrays
# --------------------------------------------------------------------------------------------------


def test_items_are_validated_with_bracket_indices() -> None:
    schema = obj(tags={"type": "array", "items": STR})
    assert check({"tags": ["a", 2]}, schema) == [
        'spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer"'
    ]


def test_min_items_violation_shows_the_count() -> None:
    errors = validate(
        {"tags": []}, obj(tags={"type": "array", "minItems": 1, "items": STR}), root_path="spec"
    )
    assert errors == [
        FieldError("spec.tags", INVALID, "Invalid value: 0: spec.tags in body should have at least 1 items")
    ]


def test_max_items_violation_is_too_many() -> None:
    errors = validate(
        {"tags": ["a", "b", "c"]}, obj(tags={"type": "array", "maxItems": 2, "items": STR}), root_path="spec"
    )
    assert errors == [FieldError("spec.tags", TOO_MANY, "Too many: 3: must have at most 2 items")]


def test_max_items_of_one_is_singular() -> None:
    assert check({"t": [1, 2]}, obj(t={"type": "array", "maxItems": 1, "items": INT})) == [
        "spec.t: Too many: 2: must have at most 1 item"
    ]


def test_unique_items_rejects_duplicates() -> None:
    schema = obj(
        t={"type": "array", "uniqueItems": True, "items": {"x-kubernetes-preserve-unknown-fields": True}}
    )
    assert check({"t": [1, 2, 1]}, schema) == [
        'spec.t: Invalid value: "": spec.t in body shouldn\'t contain duplicates'
    ]
    assert check({"t": [{"a": 1}, {"a": 1}]}, schema) == [
        'spec.t: Invalid value: "": spec.t in body shouldn\'t contain duplicates'
    ]
    assert check({"t": [1, "1", True]}, schema) == []


# --------------------------------------------------------------------------------------------------
# objects
# --------------------------------------------------------------------------------------------------


def test_min_properties_violation() -> None:
    schema = obj(m={"type": "object", "minProperties": 1, "additionalProperties": STR})
    assert check({"m": {}}, schema) == [
        "spec.m: Invalid value: 0: spec.m in body should have at least 1 properties"
    ]


def test_max_properties_violation_is_too_many() -> None:
    schema = obj(m={"type": "object", "maxProperties": 1, "additionalProperties": STR})
    errors = validate({"m": {"a": "1", "b": "2"}}, schema, root_path="spec")
    assert errors == [FieldError("spec.m", TOO_MANY, "Too many: 2: must have at most 1 item")]


def test_property_count_violation_stops_validation_of_that_object() -> None:
    schema = obj(m={"type": "object", "minProperties": 3, "properties": {"a": INT}, "required": ["b"]})
    assert check({"m": {"a": "x"}}, schema) == [
        "spec.m: Invalid value: 1: spec.m in body should have at least 3 properties"
    ]


def test_additional_properties_schema_validates_map_values_with_dotted_keys() -> None:
    schema = obj(env={"type": "object", "additionalProperties": STR})
    assert check({"env": {"FOO": "x", "BAR": 1}}, schema) == [
        'spec.env.BAR: Invalid value: "integer": spec.env.BAR in body must be of type string: "integer"'
    ]


def test_additional_properties_false_reports_a_forbidden_property() -> None:
    schema = obj(o={"type": "object", "properties": {"a": STR}, "additionalProperties": False})
    assert check({"o": {"a": "x", "zz": 1}}, schema) == [
        'spec.o: Invalid value: "zz": spec.o.zz in body is a forbidden property'
    ]


def test_additional_properties_true_accepts_anything() -> None:
    assert check({"o": {"a": 1}}, obj(o={"type": "object", "additionalProperties": True})) == []


def test_unknown_fields_are_not_validation_errors() -> None:
    assert check({"task": "x", "unknown": 1}, obj(task=STR)) == []


# --------------------------------------------------------------------------------------------------
# allOf / anyOf / oneOf / not
# --------------------------------------------------------------------------------------------------


def test_any_of_failure_reports_a_nil_field_and_the_best_branch() -> None:
    schema = obj(mode={"anyOf": [{"type": "integer"}, {"type": "string"}]})
    errors = validate({"mode": True}, schema, root_path="spec")
    assert errors == [
        FieldError(
            "<nil>", INVALID, 'Invalid value: "": "spec.mode" must validate at least one schema (anyOf)'
        ),
        FieldError(
            "spec.mode",
            TYPE_INVALID,
            'Invalid value: "boolean": spec.mode in body must be of type integer: "boolean"',
        ),
    ]


def test_any_of_reports_errors_of_the_branch_with_most_matches() -> None:
    schema = obj(
        v={
            "anyOf": [
                {"type": "integer"},
                {"type": "string", "maxLength": 2},
            ]
        }
    )
    assert check({"v": "abc"}, schema) == [
        '<nil>: Invalid value: "": "spec.v" must validate at least one schema (anyOf)',
        "spec.v: Too long: may not be more than 2 bytes",
    ]


def test_any_of_success_reports_nothing() -> None:
    schema = obj(mode={"anyOf": [{"type": "integer"}, {"type": "string"}]})
    assert check({"mode": "x"}, schema) == []


def test_one_of_with_no_match() -> None:
    schema = obj(v={"oneOf": [{"type": "integer"}, {"type": "boolean"}]})
    assert check({"v": "x"}, schema) == [
        '<nil>: Invalid value: "": "spec.v" must validate one and only one schema (oneOf). Found none valid',
        'spec.v: Invalid value: "string": spec.v in body must be of type integer: "string"',
    ]


def test_one_of_with_two_matches() -> None:
    schema = obj(v={"type": "integer", "oneOf": [{"minimum": 1}, {"maximum": 10}]})
    assert check({"v": 5}, schema) == [
        '<nil>: Invalid value: "": "spec.v" must validate one and only one schema (oneOf). '
        "Found 2 valid alternatives"
    ]
    assert check({"v": 50}, schema) == []


def test_one_of_is_commonly_used_for_mutually_exclusive_fields() -> None:
    schema = obj(
        source={
            "type": "object",
            "properties": {"a": STR, "b": STR},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        }
    )
    assert check({"source": {"a": "x"}}, schema) == []
    assert check({"source": {"a": "x", "b": "y"}}, schema) == [
        '<nil>: Invalid value: "": "spec.source" must validate one and only one schema (oneOf). '
        "Found 2 valid alternatives"
    ]


def test_all_of_reports_sub_errors_then_the_summary() -> None:
    schema = obj(v={"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 3}]})
    assert check({"v": 5}, schema) == [
        "spec.v: Invalid value: 5: spec.v in body should be less than or equal to 3",
        '<nil>: Invalid value: "": "spec.v" must validate all the schemas (allOf)',
    ]
    assert check({"v": 2}, schema) == []


def test_all_of_with_nothing_valid_says_none_validated() -> None:
    schema = obj(v={"type": "integer", "allOf": [{"minimum": 10}, {"minimum": 20}]})
    assert check({"v": 5}, schema) == [
        "spec.v: Invalid value: 5: spec.v in body should be greater than or equal to 10",
        "spec.v: Invalid value: 5: spec.v in body should be greater than or equal to 20",
        '<nil>: Invalid value: "": "spec.v" must validate all the schemas (allOf). None validated',
    ]


def test_identical_messages_are_reported_once() -> None:
    schema = obj(v={"type": "integer", "allOf": [{"minimum": 10}, {"minimum": 10}]})
    assert check({"v": 5}, schema) == [
        "spec.v: Invalid value: 5: spec.v in body should be greater than or equal to 10",
        '<nil>: Invalid value: "": "spec.v" must validate all the schemas (allOf). None validated',
    ]


def test_not_rejects_values_matching_the_schema() -> None:
    schema = obj(v={"type": "string", "not": {"enum": ["forbidden"]}})
    assert check({"v": "forbidden"}, schema) == [
        '<nil>: Invalid value: "": "spec.v" must not validate the schema (not)'
    ]
    assert check({"v": "fine"}, schema) == []


# --------------------------------------------------------------------------------------------------
# x-kubernetes-int-or-string, formats
# --------------------------------------------------------------------------------------------------


def test_int_or_string_accepts_integers_and_strings_only() -> None:
    schema = obj(port={"x-kubernetes-int-or-string": True})
    assert check({"port": 80}, schema) == []
    assert check({"port": "http"}, schema) == []
    assert check({"port": True}, schema) == [
        'spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"'
    ]


def test_int_or_string_with_the_structural_any_of_pattern() -> None:
    schema = obj(
        port={
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": "^[0-9]+%?$",
        }
    )
    assert check({"port": 5}, schema) == []
    assert check({"port": "50%"}, schema) == []
    assert check({"port": "x"}, schema) == [
        "spec.port: Invalid value: \"x\": spec.port in body should match '^[0-9]+%?$'"
    ]


def test_date_time_format() -> None:
    schema = obj(t={"type": "string", "format": "date-time"})
    assert check({"t": "2024-01-02T03:04:05Z"}, schema) == []
    assert check({"t": "2024-01-02T03:04:05.123+02:00"}, schema) == []
    assert check({"t": "yesterday"}, schema) == [
        'spec.t: Invalid value: "yesterday": spec.t in body must be of type date-time: "yesterday"'
    ]
    assert len(check({"t": "2024-13-02T03:04:05Z"}, schema)) == 1


def test_date_format() -> None:
    schema = obj(d={"type": "string", "format": "date"})
    assert check({"d": "2024-02-29"}, schema) == []
    assert len(check({"d": "2023-02-29"}, schema)) == 1


def test_byte_format_requires_padded_base64() -> None:
    schema = obj(b={"type": "string", "format": "byte"})
    assert check({"b": "aGVsbG8="}, schema) == []
    assert check({"b": "aGVsbG8"}, schema) == [
        'spec.b: Invalid value: "aGVsbG8": spec.b in body must be of type byte: "aGVsbG8"'
    ]


def test_duration_format_accepts_go_and_scala_style() -> None:
    schema = obj(d={"type": "string", "format": "duration"})
    for good in ("1h30m", "500ms", "3 days", "0", "1.5s"):
        assert check({"d": good}, schema) == [], good
    assert len(check({"d": "soon"}, schema)) == 1


def test_network_and_identifier_formats() -> None:
    cases = {
        "ipv4": ("10.0.0.1", "10.0.0.300"),
        "ipv6": ("fe80::1", "10.0.0.1"),
        "cidr": ("10.0.0.0/8", "10.0.0.0"),
        "mac": ("01:23:45:67:89:ab", "01:23:45"),
        "uuid": ("123e4567-e89b-12d3-a456-426614174000", "123"),
        "uri": ("https://example.com/x", "example.com"),
        "email": ("a@example.com", "not-an-email"),
        "hostname": ("api.example.com", "-bad-.com"),
        "hexcolor": ("#fff", "#ggg"),
    }
    for fmt, (good, bad) in cases.items():
        schema = obj(v={"type": "string", "format": fmt})
        assert check({"v": good}, schema) == [], fmt
        assert check({"v": bad}, schema) == [
            f'spec.v: Invalid value: "{bad}": spec.v in body must be of type {fmt}: "{bad}"'
        ], fmt


def test_formats_the_server_does_not_support_are_ignored() -> None:
    assert check({"n": 2**40}, obj(n={"type": "integer", "format": "int32"})) == []
    assert check({"s": "anything"}, obj(s={"type": "string", "format": "made-up"})) == []


def test_format_mismatch_on_a_non_string_names_the_format() -> None:
    schema = obj(t={"type": "string", "format": "date-time"})
    assert check({"t": 5}, schema) == [
        'spec.t: Invalid value: "int64": spec.t in body must be of type date-time: "int64"'
    ]


# --------------------------------------------------------------------------------------------------
# x-kubernetes-list-type, x-kubernetes-embedded-resource, CEL
# --------------------------------------------------------------------------------------------------


def test_list_type_set_reports_the_duplicate_entry() -> None:
    schema = obj(s={"type": "array", "x-kubernetes-list-type": "set", "items": STR})
    errors = validate({"s": ["a", "b", "a"]}, schema, root_path="spec")
    assert errors == [FieldError("spec.s[2]", DUPLICATE, 'Duplicate value: "a"')]


def test_list_type_set_reports_each_value_once() -> None:
    schema = obj(s={"type": "array", "x-kubernetes-list-type": "set", "items": INT})
    assert check({"s": [1, 1, 1, 2, 2]}, schema) == [
        "spec.s[1]: Duplicate value: 1",
        "spec.s[4]: Duplicate value: 2",
    ]


def test_list_type_set_keeps_integers_and_floats_apart_like_go() -> None:
    schema = obj(s={"type": "array", "x-kubernetes-list-type": "set", "items": NUM})
    assert check({"s": [1, 1.0]}, schema) == []
    assert check({"s": [1.5, 1.5]}, schema) == ["spec.s[1]: Duplicate value: 1.5"]


def test_list_type_map_reports_the_duplicate_key() -> None:
    schema = obj(
        containers={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": obj(name=STR, image=STR),
        }
    )
    value = {"containers": [{"name": "a", "image": "x"}, {"name": "b"}, {"name": "a", "image": "y"}]}
    assert check(value, schema) == ['spec.containers[2]: Duplicate value: {"name":"a"}']


def test_list_type_map_with_several_keys() -> None:
    schema = obj(
        ports={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": obj(port=INT, protocol=STR),
        }
    )
    ok = {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}]}
    dup = {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "TCP"}]}
    assert check(ok, schema) == []
    assert check(dup, schema) == ['spec.ports[1]: Duplicate value: {"port":80,"protocol":"TCP"}']


def test_list_type_map_requires_object_items() -> None:
    schema = obj(m={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"]})
    assert check({"m": [{"k": "a"}, "oops"]}, schema) == [
        'spec.m[1]: Invalid value: "oops": must be an object for an array of list-type map'
    ]


def test_list_type_errors_under_map_keys_use_bracket_keys() -> None:
    schema = obj(
        groups={
            "type": "object",
            "additionalProperties": {"type": "array", "x-kubernetes-list-type": "set", "items": STR},
        }
    )
    assert check({"groups": {"dev": ["a", "a"]}}, schema) == ['spec.groups[dev][1]: Duplicate value: "a"']


def test_list_type_errors_come_after_schema_errors() -> None:
    schema = obj(
        s={"type": "array", "x-kubernetes-list-type": "set", "items": STR},
        n=INT,
    )
    assert check({"s": ["a", "a"], "n": "x"}, schema) == [
        'spec.n: Invalid value: "string": spec.n in body must be of type integer: "string"',
        'spec.s[1]: Duplicate value: "a"',
    ]


def test_embedded_resource_requires_api_version_and_kind() -> None:
    schema = obj(
        template={
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True,
        }
    )
    assert check({"template": {"spec": {}}}, schema) == [
        "spec.template.apiVersion: Required value: must not be empty",
        "spec.template.kind: Required value: must not be empty",
    ]
    assert check({"template": {"apiVersion": "v1", "kind": "Pod"}}, schema) == []


def test_embedded_resource_checks_kind_and_api_version_shape() -> None:
    schema = obj(
        t={
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True,
        }
    )
    errors = check({"t": {"apiVersion": "a/b/c", "kind": "My_Kind"}}, schema)
    assert errors[0] == 'spec.t.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c'
    assert errors[1].startswith(
        'spec.t.kind: Invalid value: "My_Kind": may have mixed case, but should otherwise match: '
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-'"
    )
    assert check({"t": {"apiVersion": 1, "kind": ""}}, schema) == [
        "spec.t.apiVersion: Invalid value: 1: must be a string",
        'spec.t.kind: Invalid value: "": must not be empty',
    ]


def test_cel_validation_rules_are_ignored() -> None:
    schema = obj(
        n={"type": "integer", "x-kubernetes-validations": [{"rule": "self > 100", "message": "too small"}]}
    )
    assert check({"n": 1}, schema) == []


def test_root_path_prefixes_paths_and_messages() -> None:
    errors = validate({"a": 1}, obj(a=STR), root_path="spec.template")
    assert strs(errors) == [
        'spec.template.a: Invalid value: "integer": spec.template.a in body must be of type string: "integer"'
    ]


def test_valid_value_yields_no_errors() -> None:
    schema = spec_schema(
        task=STR,
        replicas={"type": "integer", "minimum": 1},
        tags={"type": "array", "items": STR},
        env={"type": "object", "additionalProperties": STR},
    )
    value = {"spec": {"task": "t", "replicas": 2, "tags": ["a"], "env": {"A": "b"}}}
    assert validate(value, schema) == []


# --------------------------------------------------------------------------------------------------
# validate_custom_resource
# --------------------------------------------------------------------------------------------------

AGENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": STR,
        "kind": STR,
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["task"],
            "properties": {
                "task": STR,
                "cleanup": {"type": "string", "enum": ["delete", "keep"], "default": "delete"},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def test_custom_resource_passes_when_valid() -> None:
    cr = {"apiVersion": "a.io/v1", "kind": "Agent", "metadata": {"name": "x"}, "spec": {"task": "t"}}
    assert validate_custom_resource(cr, AGENT_SCHEMA) == []


def test_custom_resource_errors_carry_server_paths() -> None:
    cr = {"apiVersion": "a.io/v1", "kind": "Agent", "metadata": {"name": "x"}, "spec": {"cleanup": "x"}}
    assert strs(validate_custom_resource(cr, AGENT_SCHEMA)) == [
        'spec.cleanup: Unsupported value: "x": supported values: "delete", "keep"',
        "spec.task: Required value",
    ]


def test_custom_resource_missing_spec_is_required() -> None:
    cr = {"apiVersion": "a.io/v1", "kind": "Agent", "metadata": {"name": "x"}}
    assert strs(validate_custom_resource(cr, AGENT_SCHEMA)) == ["spec: Required value"]


def test_custom_resource_metadata_is_not_validated_beyond_name_constraints() -> None:
    schema = copy.deepcopy(AGENT_SCHEMA)
    schema["properties"]["metadata"] = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 5}, "labels": {"type": "integer"}},
    }
    cr = {"metadata": {"name": "toolongname", "labels": {"a": "b"}}, "spec": {"task": "t"}}
    assert strs(validate_custom_resource(cr, schema)) == [
        "metadata.name: Too long: may not be more than 5 bytes"
    ]


# --------------------------------------------------------------------------------------------------
# format_invalid
# --------------------------------------------------------------------------------------------------


def test_format_invalid_with_one_error() -> None:
    errs = [FieldError("spec.task", REQUIRED, "Required value")]
    assert format_invalid("Agent", "example.com", "a1", errs) == (
        'Agent.example.com "a1" is invalid: spec.task: Required value'
    )


def test_format_invalid_with_several_errors_uses_brackets() -> None:
    errs = [
        FieldError("spec.task", REQUIRED, "Required value"),
        FieldError(
            "spec.cleanup", NOT_SUPPORTED, 'Unsupported value: "x": supported values: "delete", "keep"'
        ),
    ]
    assert format_invalid("Agent", "example.com", "a1", errs) == (
        'Agent.example.com "a1" is invalid: [spec.task: Required value, '
        'spec.cleanup: Unsupported value: "x": supported values: "delete", "keep"]'
    )


def test_format_invalid_lists_identical_errors_once() -> None:
    e = FieldError("spec.task", REQUIRED, "Required value")
    assert format_invalid("Agent", "example.com", "a1", [e, e]) == (
        'Agent.example.com "a1" is invalid: spec.task: Required value'
    )


def test_format_invalid_without_errors_or_group() -> None:
    assert format_invalid("Pod", "", "p", []) == 'Pod "p" is invalid'


def test_format_invalid_quotes_the_name_like_go() -> None:
    assert format_invalid("Agent", "x.io", 'we"ird', []) == 'Agent.x.io "we\\"ird" is invalid'


def test_format_invalid_round_trips_validation_output() -> None:
    cr = {"spec": {"cleanup": "x"}}
    message = format_invalid("Agent", "a.io", "x", validate_custom_resource(cr, AGENT_SCHEMA))
    assert message == (
        'Agent.a.io "x" is invalid: [spec.cleanup: Unsupported value: "x": supported values: '
        '"delete", "keep", spec.task: Required value]'
    )


# --------------------------------------------------------------------------------------------------
# prune
# --------------------------------------------------------------------------------------------------


def test_prune_drops_unknown_fields_and_reports_their_paths() -> None:
    schema = spec_schema(task=STR, steps={"type": "array", "items": obj(name=STR)})
    cr = {"spec": {"task": "t", "foo": 1, "steps": [{"name": "a", "bar": 2}]}, "extra": True}
    pruned, unknown = prune(cr, schema)
    assert pruned == {"spec": {"task": "t", "steps": [{"name": "a"}]}}
    assert unknown == ["extra", "spec.foo", "spec.steps[0].bar"]


def test_prune_reports_unknown_paths_sorted() -> None:
    _, unknown = prune({"spec": {"z": 1, "a": 1, "m": {"x": 1}}}, spec_schema())
    assert unknown == ["spec.a", "spec.m", "spec.z"]


def test_prune_keeps_api_version_kind_and_metadata_at_the_root() -> None:
    cr = {"apiVersion": "a.io/v1", "kind": "Agent", "metadata": {"name": "x", "whatever": 1}, "spec": {}}
    pruned, unknown = prune(cr, spec_schema())
    assert pruned == cr
    assert unknown == []


def test_prune_silently_drops_root_meta_fields_of_the_wrong_type() -> None:
    pruned, unknown = prune({"apiVersion": 5, "metadata": "x"}, {"type": "object"})
    assert pruned == {}
    assert unknown == []


def test_prune_keeps_everything_under_preserve_unknown_fields() -> None:
    schema = obj(status={"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    cr = {"status": {"anything": {"deep": [1, 2]}, "phase": "Running"}}
    pruned, unknown = prune(cr, schema)
    assert pruned == cr
    assert unknown == []


def test_prune_still_prunes_declared_properties_below_preserve_unknown_fields() -> None:
    schema = obj(
        status={
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"known": obj(a=STR)},
        }
    )
    pruned, unknown = prune({"status": {"free": 1, "known": {"a": "x", "b": "y"}}}, schema)
    assert pruned == {"status": {"free": 1, "known": {"a": "x"}}}
    assert unknown == ["status.known.b"]


def test_prune_with_preserve_unknown_fields_at_the_root_keeps_all() -> None:
    cr = {"apiVersion": "v1", "kind": "K", "anything": {"x": 1}}
    pruned, unknown = prune(cr, {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    assert pruned == cr
    assert unknown == []


def test_prune_keeps_meta_fields_of_embedded_resources() -> None:
    schema = obj(
        template={
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "properties": {"spec": obj(a=STR)},
        }
    )
    cr = {
        "template": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"labels": {"a": "b"}},
            "spec": {"a": "x", "b": 1},
        }
    }
    pruned, unknown = prune(cr, schema)
    assert pruned == {
        "template": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"labels": {"a": "b"}},
            "spec": {"a": "x"},
        }
    }
    assert unknown == ["template.spec.b"]


def test_prune_walks_into_additional_properties() -> None:
    schema = obj(m={"type": "object", "additionalProperties": obj(a=STR)})
    pruned, unknown = prune({"m": {"k1": {"a": "x", "z": 1}}}, schema)
    assert pruned == {"m": {"k1": {"a": "x"}}}
    assert unknown == ["m.k1.z"]


def test_prune_empties_objects_given_to_scalar_fields() -> None:
    pruned, unknown = prune({"task": {"a": 1}}, obj(task=STR))
    assert pruned == {"task": {}}
    assert unknown == ["task.a"]


def test_prune_of_a_non_root_value_drops_meta_field_names_without_reporting_them() -> None:
    # like the server: apiVersion/kind/metadata are never reported at the top level
    pruned, unknown = prune({"apiVersion": "v1", "a": "x", "b": 1}, obj(a=STR), is_resource_root=False)
    assert pruned == {"a": "x"}
    assert unknown == ["b"]


def test_prune_never_mutates_its_input() -> None:
    cr = {"spec": {"task": "t", "foo": {"bar": [1]}}}
    before = copy.deepcopy(cr)
    pruned, _ = prune(cr, spec_schema(task=STR))
    assert cr == before
    pruned["spec"]["task"] = "changed"
    assert cr["spec"]["task"] == "t"


# --------------------------------------------------------------------------------------------------
# prune_nulls
# --------------------------------------------------------------------------------------------------


def test_prune_nulls_drops_non_nullable_nulls_without_defaults() -> None:
    schema = obj(
        a=STR,
        b={"type": "string", "nullable": True},
        c={"type": "string", "default": "x"},
        l={"type": "array", "items": STR},
    )
    value = {"a": None, "b": None, "c": None, "l": [None], "unknown": None}
    assert prune_nulls(value, schema) == {"b": None, "c": None, "l": [None], "unknown": None}
    assert value["a"] is None  # input untouched


def test_pruned_null_for_a_required_field_becomes_required_value() -> None:
    schema = {"type": "object", "required": ["task"], "properties": {"task": STR}}
    assert check(prune_nulls({"task": None}, schema), schema) == ["spec.task: Required value"]


def test_prune_nulls_applies_to_map_values() -> None:
    schema = obj(m={"type": "object", "additionalProperties": STR})
    assert prune_nulls({"m": {"a": None, "b": "x"}}, schema) == {"m": {"b": "x"}}


# --------------------------------------------------------------------------------------------------
# apply_defaults
# --------------------------------------------------------------------------------------------------


def test_absent_property_gets_its_default() -> None:
    schema = spec_schema(cleanup={"type": "string", "default": "delete"})
    assert apply_defaults({"spec": {}}, schema) == {"spec": {"cleanup": "delete"}}


def test_existing_values_are_not_overwritten() -> None:
    schema = spec_schema(cleanup={"type": "string", "default": "delete"})
    assert apply_defaults({"spec": {"cleanup": "keep"}}, schema) == {"spec": {"cleanup": "keep"}}


def test_null_is_defaulted_unless_nullable() -> None:
    schema = obj(a={"type": "string", "default": "x"}, b={"type": "string", "default": "y", "nullable": True})
    assert apply_defaults({"a": None, "b": None}, schema) == {"a": "x", "b": None}


def test_absent_parent_object_is_not_created_without_its_own_default() -> None:
    schema = spec_schema(inner=obj(a={"type": "string", "default": "x"}))
    assert apply_defaults({"spec": {}}, schema) == {"spec": {}}


def test_empty_object_default_picks_up_nested_defaults() -> None:
    schema = spec_schema(
        resources={
            "type": "object",
            "default": {},
            "properties": {"cpu": {"type": "string", "default": "100m"}, "mem": STR},
        }
    )
    assert apply_defaults({"spec": {}}, schema) == {"spec": {"resources": {"cpu": "100m"}}}


def test_defaults_apply_inside_array_items() -> None:
    schema = spec_schema(
        steps={"type": "array", "items": obj(name=STR, retries={"type": "integer", "default": 3})}
    )
    value = {"spec": {"steps": [{"name": "a"}, {"name": "b", "retries": 0}]}}
    assert apply_defaults(value, schema) == {
        "spec": {"steps": [{"name": "a", "retries": 3}, {"name": "b", "retries": 0}]}
    }


def test_null_array_items_take_the_items_default() -> None:
    schema = obj(l={"type": "array", "items": {"type": "string", "default": "z"}})
    assert apply_defaults({"l": ["a", None]}, schema) == {"l": ["a", "z"]}


def test_defaults_apply_inside_additional_properties() -> None:
    schema = obj(
        m={
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "default": {"on": True},
                "properties": {"on": BOOL, "level": {"type": "integer", "default": 1}},
            },
        }
    )
    assert apply_defaults({"m": {"a": {}, "b": None}}, schema) == {
        "m": {"a": {"level": 1}, "b": {"on": True, "level": 1}}
    }


def test_default_values_are_pruned_before_use() -> None:
    schema = obj(o={"type": "object", "default": {"a": "x", "junk": 1}, "properties": {"a": STR}})
    assert apply_defaults({}, schema) == {"o": {"a": "x"}}


def test_null_default_means_no_default() -> None:
    assert apply_defaults({}, obj(a={"type": "string", "nullable": True, "default": None})) == {}


def test_apply_defaults_never_mutates_input_or_shares_schema_values() -> None:
    schema = obj(
        o={
            "type": "object",
            "default": {"list": [1]},
            "properties": {"list": {"type": "array", "items": INT}},
        }
    )
    value: dict[str, Any] = {}
    out = apply_defaults(value, schema)
    assert value == {}
    out["o"]["list"].append(2)
    assert schema["properties"]["o"]["default"] == {"list": [1]}


def test_defaulting_then_validation_accepts_a_minimal_resource() -> None:
    cr = {"apiVersion": "a.io/v1", "kind": "Agent", "metadata": {"name": "x"}, "spec": {"task": "t"}}
    defaulted = apply_defaults(cr, AGENT_SCHEMA)
    assert defaulted["spec"]["cleanup"] == "delete"
    assert validate_custom_resource(defaulted, AGENT_SCHEMA) == []


# --------------------------------------------------------------------------------------------------
# check_structural
# --------------------------------------------------------------------------------------------------

P = "spec.versions[0].schema.openAPIV3Schema"


def test_structural_schema_has_no_errors() -> None:
    assert check_structural(AGENT_SCHEMA) == []


def test_missing_type_on_a_field_is_reported() -> None:
    schema = {"type": "object", "properties": {"spec": {"properties": {"a": STR}}}}
    assert check_structural(schema) == [
        f"{P}.properties[spec].type: Required value: must not be empty for specified object fields"
    ]


def test_missing_type_at_the_root_and_on_items_is_reported() -> None:
    schema = {"properties": {"l": {"type": "array", "items": {}}}}
    assert check_structural(schema) == [
        f"{P}.properties[l].items.type: Required value: must not be empty for specified array items",
        f"{P}.type: Required value: must not be empty at the root",
    ]


def test_root_must_be_an_object() -> None:
    assert check_structural({"type": "string"}) == [
        f'{P}.type: Invalid value: "string": must be object at the root'
    ]


def test_array_without_items_is_reported() -> None:
    assert check_structural(obj(l={"type": "array"})) == [
        f"{P}.properties[l].items: Required value: must be specified"
    ]


def test_preserve_unknown_fields_and_int_or_string_need_no_type() -> None:
    schema = obj(
        any={"x-kubernetes-preserve-unknown-fields": True}, port={"x-kubernetes-int-or-string": True}
    )
    assert check_structural(schema) == []


def test_type_inside_any_of_is_not_structural_except_for_int_or_string() -> None:
    bad = obj(v={"type": "string", "anyOf": [{"type": "string"}, {"pattern": "x"}]})
    good = obj(v={"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]})
    assert check_structural(bad) == [
        f"{P}.properties[v].anyOf[0].type: Forbidden: must be empty to be structural"
    ]
    assert check_structural(good) == []


def test_value_validation_must_only_mention_declared_properties() -> None:
    schema = obj(o={"type": "object", "properties": {"a": STR}, "anyOf": [{"required": ["a"]}]})
    assert check_structural(schema) == []
    root = {"type": "object", "properties": {"a": STR}, "anyOf": [{"properties": {"b": {}}}]}
    assert check_structural(root) == [
        f"{P}.properties[b]: Required value: because it is defined in {P}.anyOf[0].properties[b]"
    ]


def test_metadata_may_only_restrict_name_and_generate_name() -> None:
    ok = obj(metadata={"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}})
    bad = obj(metadata={"type": "object", "properties": {"labels": {"type": "object"}}})
    assert check_structural(ok) == []
    assert check_structural(bad) == [
        f"{P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, "
        "but metadata is implicitly specified"
    ]


def test_additional_properties_at_the_root_is_forbidden() -> None:
    assert check_structural({"type": "object", "additionalProperties": STR}) == [
        f"{P}.additionalProperties: Forbidden: must not be used at the root"
    ]


def test_apiextensions_restrictions_are_reported() -> None:
    schema = obj(
        a={"type": "array", "items": STR, "uniqueItems": True},
        b={"type": "object", "properties": {"x": STR}, "additionalProperties": STR},
        c={"$ref": "#/definitions/c", "type": "string"},
        d={"type": "strin"},
        e={"type": "string", "x-kubernetes-preserve-unknown-fields": False},
    )
    assert check_structural(schema) == [
        f"{P}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime "
        "complexity becomes quadratic",
        f"{P}.properties[b].additionalProperties: Forbidden: "
        "additionalProperties and properties are mutual exclusive",
        f"{P}.properties[c].$ref: Forbidden: $ref is not supported",
        f'{P}.properties[d].type: Unsupported value: "strin": supported values: "array", "boolean", '
        '"integer", "number", "object", "string"',
        f"{P}.properties[e].x-kubernetes-preserve-unknown-fields: Invalid value: false: "
        "must be true or undefined",
    ]


def test_list_type_map_needs_keys_and_object_items() -> None:
    schema = obj(l={"type": "array", "x-kubernetes-list-type": "map", "items": STR})
    assert check_structural(schema) == [
        f"{P}.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if "
        "x-kubernetes-list-type is map",
        f'{P}.properties[l].items.type: Invalid value: "string": must be object if parent array\'s '
        "x-kubernetes-list-type is map",
    ]


def test_list_type_must_be_known() -> None:
    schema = obj(l={"type": "array", "items": STR, "x-kubernetes-list-type": "bag"})
    assert check_structural(schema) == [
        f'{P}.properties[l].x-kubernetes-list-type: Unsupported value: "bag": supported values: '
        '"atomic", "set", "map"'
    ]


def test_pattern_must_be_a_valid_re2_expression() -> None:
    schema = obj(s={"type": "string", "pattern": "^(?=a)"})
    assert check_structural(schema) == [
        f'{P}.properties[s].pattern: Invalid value: "^(?=a)": must be a valid regular expression, '
        "but isn't: error parsing regexp: invalid or unsupported Perl syntax: `(?=`"
    ]


def test_defaults_in_top_level_metadata_are_forbidden() -> None:
    schema = obj(metadata={"type": "object", "default": {}})
    assert (
        f"{P}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
        in check_structural(schema)
    )


def test_defaults_must_match_their_schema() -> None:
    schema = spec_schema(n={"type": "integer", "default": "three"})
    assert check_structural(schema) == [
        f'{P}.properties[spec].properties[n].default: Invalid value: "string": '
        ' in body must be of type integer: "string"'
    ]


def test_defaults_must_not_carry_unknown_fields() -> None:
    schema = spec_schema(o={"type": "object", "default": {"a": "x", "junk": 1}, "properties": {"a": STR}})
    assert check_structural(schema) == [
        f'{P}.properties[spec].properties[o].default: Invalid value: {{"a":"x","junk":1}}: '
        "must not have unknown fields"
    ]


def test_check_structural_uses_the_given_path() -> None:
    assert check_structural(
        {"type": "object", "properties": {"x": {}}}, path="spec.versions[2].schema.openAPIV3Schema"
    ) == [
        "spec.versions[2].schema.openAPIV3Schema.properties[x].type: Required value: "
        "must not be empty for specified object fields"
    ]


def test_structural_errors_are_sorted() -> None:
    schema = {"type": "object", "properties": {"b": {}, "a": {}}}
    errors = check_structural(schema)
    assert errors == sorted(errors)
    assert len(errors) == 2


# --------------------------------------------------------------------------------------------------
# json_path_get
# --------------------------------------------------------------------------------------------------

RESOURCE: dict[str, Any] = {
    "metadata": {
        "name": "a1",
        "creationTimestamp": "2024-01-01T00:00:00Z",
        "annotations": {"example.com/owner": "me"},
    },
    "spec": {"agentRef": "writer", "replicas": 0},
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Scheduled", "status": "True", "priority": 1},
            {"type": "Ready", "status": "False", "priority": 5},
        ],
    },
}


def test_json_path_reads_simple_fields() -> None:
    assert json_path_get(RESOURCE, ".spec.agentRef") == "writer"
    assert json_path_get(RESOURCE, ".status.phase") == "Running"
    assert json_path_get(RESOURCE, ".metadata.creationTimestamp") == "2024-01-01T00:00:00Z"


def test_json_path_returns_falsy_values_as_they_are() -> None:
    assert json_path_get(RESOURCE, ".spec.replicas") == 0


def test_json_path_returns_none_when_absent() -> None:
    assert json_path_get(RESOURCE, ".status.missing") is None
    assert json_path_get(RESOURCE, ".nothing.at.all") is None
    assert json_path_get(RESOURCE, ".spec.agentRef.deeper") is None


def test_json_path_indexes_lists() -> None:
    assert json_path_get(RESOURCE, ".status.conditions[0].type") == "Scheduled"
    assert json_path_get(RESOURCE, ".status.conditions[-1].type") == "Ready"
    assert json_path_get(RESOURCE, ".status.conditions[7].type") is None


def test_json_path_filters_lists() -> None:
    assert json_path_get(RESOURCE, ".status.conditions[?(@.type=='Ready')].status") == "False"
    assert json_path_get(RESOURCE, '.status.conditions[?(@.type=="Scheduled")].status') == "True"
    assert json_path_get(RESOURCE, ".status.conditions[?(@.type!='Scheduled')].type") == "Ready"
    assert json_path_get(RESOURCE, ".status.conditions[?(@.priority > 2)].type") == "Ready"
    assert json_path_get(RESOURCE, ".status.conditions[?(@.type=='Gone')].status") is None


def test_json_path_wildcards_and_slices_return_the_first_match() -> None:
    assert json_path_get(RESOURCE, ".status.conditions[*].type") == "Scheduled"
    assert json_path_get(RESOURCE, ".status.conditions[1:].type") == "Ready"


def test_json_path_supports_quoted_and_escaped_keys() -> None:
    assert json_path_get(RESOURCE, ".metadata.annotations['example.com/owner']") == "me"
    assert json_path_get(RESOURCE, r".metadata.annotations.example\.com/owner") == "me"


def test_json_path_accepts_braces_dollar_and_recursive_descent() -> None:
    assert json_path_get(RESOURCE, "{.status.phase}") == "Running"
    assert json_path_get(RESOURCE, "$.status.phase") == "Running"
    assert json_path_get(RESOURCE, "..agentRef") == "writer"


def test_json_path_returns_containers_too() -> None:
    assert json_path_get(RESOURCE, ".spec") == {"agentRef": "writer", "replicas": 0}


def test_json_path_with_bad_syntax_returns_none() -> None:
    assert json_path_get(RESOURCE, ".status.conditions[") is None
    assert json_path_get(RESOURCE, ".status.conditions[abc]") is None
