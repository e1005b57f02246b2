"""Reply parsing (strict / lenient), reply-shape flags, and answer matching."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.records import RunWriter, read_jsonl
from workbench.worlds.stigmergy.answers import is_correct
from workbench.worlds.stigmergy.parsing import DECODE_DEPTH, ParseOutcome, parse_both, parse_reply, reply_shape

STORE = ("list", "read", "write", "submit")
NO_STORE = ("submit",)

# text, allowed ops, strict valid, lenient valid, fenced, prose_wrapped, multi_object, op expected when valid
CASES = [
    ("clean", '{"op": "list"}', STORE, True, True, False, False, False, {"op": "list"}),
    ("clean-with-outer-whitespace", ' \n {"op": "read", "key": "C_B"}\n\t', STORE, True, True, False, False, False,
     {"op": "read", "key": "C_B"}),
    ("extra-fields-dropped", '{"op": "read", "key": "k", "why": "because"}', STORE, True, True, False, False, False,
     {"op": "read", "key": "k"}),
    ("prose-before", 'Let me look at the store first.\n{"op": "list"}', STORE, False, True, False, True, False,
     {"op": "list"}),
    ("prose-after", '{"op": "submit", "answer": 42} That is my answer.', STORE, False, True, False, True, False,
     {"op": "submit", "answer": 42}),
    ("fenced", '```json\n{"op": "write", "key": "C_A", "value": 27}\n```', STORE, False, True, True, False, False,
     {"op": "write", "key": "C_A", "value": 27}),
    ("fenced-bare", '```\n{"op": "list"}\n```', STORE, False, True, True, False, False, {"op": "list"}),
    ("fenced-with-prose", 'Here it is:\n```json\n{"op": "list"}\n```', STORE, False, True, True, True, False,
     {"op": "list"}),
    ("two-objects", '{"op": "list"}\n{"op": "submit", "answer": 3}', STORE, False, False, False, False, True, None),
    ("two-objects-prose-between", '{"op": "list"} and then {"op": "read", "key": "k"}', STORE, False, False, False,
     True, True, None),
    ("nested-braces-in-value", '{"op": "write", "key": "k", "value": {"a": {"b": "}{"}}}', STORE, True, True, False,
     False, False, {"op": "write", "key": "k", "value": {"a": {"b": "}{"}}}),
    ("braces-in-strings", '{"op": "write", "key": "{x}", "value": "}"}', STORE, True, True, False, False, False,
     {"op": "write", "key": "{x}", "value": "}"}),
    ("prose-braces-before-json", 'Use {braces} then {"op": "list"}', STORE, False, False, False, True, False, None),
    ("empty", "", STORE, False, False, False, False, False, None),
    ("whitespace-only", " \n\t ", STORE, False, False, False, False, False, None),
    ("non-json", "I think the answer is 42.", STORE, False, False, False, False, False, None),
    ("broken-json", '{"op": "list"', STORE, False, False, False, False, False, None),
    ("json-array", '[{"op": "list"}]', STORE, False, True, False, True, False, {"op": "list"}),
    ("json-array-of-numbers", "[1, 2, 3]", STORE, False, False, False, False, False, None),
    ("json-string", '"{\\"op\\": \\"list\\"}"', STORE, False, False, False, False, False, None),
    ("unknown-op", '{"op": "delete", "key": "k"}', STORE, False, False, False, False, False, None),
    ("op-not-string", '{"op": ["list"]}', STORE, False, False, False, False, False, None),
    ("missing-op", '{"key": "k"}', STORE, False, False, False, False, False, None),
    ("read-missing-key", '{"op": "read"}', STORE, False, False, False, False, False, None),
    ("read-empty-key", '{"op": "read", "key": ""}', STORE, False, False, False, False, False, None),
    ("read-non-string-key", '{"op": "read", "key": 7}', STORE, False, False, False, False, False, None),
    ("write-missing-key", '{"op": "write", "value": 1}', STORE, False, False, False, False, False, None),
    ("write-missing-value", '{"op": "write", "key": "k"}', STORE, False, False, False, False, False, None),
    ("write-null-value", '{"op": "write", "key": "k", "value": null}', STORE, True, True, False, False, False,
     {"op": "write", "key": "k", "value": None}),
    ("submit-missing-answer", '{"op": "submit"}', STORE, False, False, False, False, False, None),
    ("submit-string-answer", '{"op": "submit", "answer": "42"}', STORE, True, True, False, False, False,
     {"op": "submit", "answer": "42"}),
    ("no-store-list", '{"op": "list"}', NO_STORE, False, False, False, False, False, None),
    ("no-store-read", '{"op": "read", "key": "C_B"}', NO_STORE, False, False, False, False, False, None),
    ("no-store-write", '{"op": "write", "key": "C_A", "value": 1}', NO_STORE, False, False, False, False, False, None),
    ("no-store-submit", '{"op": "submit", "answer": 7}', NO_STORE, True, True, False, False, False,
     {"op": "submit", "answer": 7}),
    ("no-store-fenced-submit", '```json\n{"op": "submit", "answer": 7}\n```', NO_STORE, False, True, True, False,
     False, {"op": "submit", "answer": 7}),
]


@pytest.mark.parametrize(("name", "text", "ops", "strict", "lenient", "fenced", "prose", "multi", "op"), CASES,
                         ids=[c[0] for c in CASES])
def test_known_replies(name, text, ops, strict, lenient, fenced, prose, multi, op) -> None:
    s = parse_reply(text, "strict", ops)
    le = parse_reply(text, "lenient", ops)
    assert (s.valid, le.valid) == (strict, lenient), (s, le)
    for out, expect_valid in ((s, strict), (le, lenient)):
        if expect_valid:
            assert out.op == op
            assert out.error is None
        else:
            assert out.op is None
            assert isinstance(out.error, str) and out.error
    shape = reply_shape(text)
    assert (shape.fenced, shape.prose_wrapped, shape.multi_object) == (fenced, prose, multi), shape
    assert shape.empty == (not text.strip())
    both = parse_both(text, ops)
    assert both["strict"] == s.to_record()
    assert both["lenient"] == le.to_record()
    assert both["shape"]["fenced"] == fenced
    assert both["shape"]["prose_wrapped"] == prose
    assert both["shape"]["multi_object"] == multi


@pytest.mark.parametrize(("text", "ops", "needle"), [
    ('{"op": "delete"}', STORE, "delete"),
    ('{"op": "list"}', NO_STORE, "list"),
    ('{"key": "k"}', STORE, "op"),
    ('{"op": "write", "key": "k"}', STORE, "value"),
    ('{"op": "submit"}', STORE, "answer"),
    ('{"op": "read"}', STORE, "key"),
    ("", STORE, "empty"),
    ("[1]", STORE, "list"),
])
def test_errors_say_what_was_wrong(text: str, ops: tuple[str, ...], needle: str) -> None:
    out = parse_reply(text, "strict", ops)
    assert not out.valid
    assert needle in out.error


def test_shape_counts_objects() -> None:
    assert reply_shape('{"op": "list"}').n_objects == 1
    assert reply_shape('{"a": 1} {"b": 2} {"c": 3}').n_objects == 3
    assert reply_shape("no json here").n_objects == 0
    assert reply_shape("").empty and not reply_shape("x").empty


def test_unknown_rule_is_an_error_not_a_silent_default() -> None:
    with pytest.raises(ValueError, match="rule"):
        parse_reply('{"op": "list"}', "sloppy", STORE)


def test_non_text_reply_is_invalid() -> None:
    for bad in (None, 42, b'{"op": "list"}'):
        out = parse_reply(bad, "lenient", STORE)  # type: ignore[arg-type]
        assert not out.valid and out.op is None and out.error
        rec = parse_both(bad, STORE)  # type: ignore[arg-type]
        assert rec["shape"]["empty"] is True and not rec["strict"]["valid"] and not rec["lenient"]["valid"]


def test_backticks_inside_a_json_string_are_not_a_fence() -> None:
    """Regression: reply_shape once searched the whole reply for ``` and so flagged a
    clean single object as fenced when a string value merely contained backticks."""
    text = '{"op": "write", "key": "note", "value": "use ``` for code"}'
    assert parse_reply(text, "strict", STORE).valid
    assert reply_shape(text).fenced is False
    assert reply_shape(f"```json\n{text}\n```").fenced is True


def test_parse_record_of_lone_surrogate_escape_is_writable(tmp_path) -> None:
    """Regression: the ASCII escape \\ud800 parses to a lone surrogate; records were once
    dumped with ensure_ascii=False, so RunWriter.append_world raised UnicodeEncodeError
    and the whole study run died."""
    text = '{"op": "write", "key": "k", "value": "\\ud800"}'  # plain ASCII, as a model could send it
    assert text.isascii()
    rec = parse_both(text, STORE)
    assert rec["strict"]["valid"]
    step = {"world_id": "w", "run": 1, "seq": 0, "reply": {"text": text}, "parse": rec, "op": rec["strict"]["op"]}
    RunWriter(tmp_path).append_world({"world_id": "w", "run": 1}, [step])  # what study.run_study_async does
    back = list(read_jsonl(tmp_path / "steps.jsonl"))
    assert len(back) == 1 and back[0]["op"]["value"] == chr(0xD800)
    assert back[0]["reply"]["text"] == text


@pytest.mark.parametrize("depth", [1, 31, 40, 200, 900])
def test_deeply_nested_valid_values_never_break_the_record(depth: int, tmp_path) -> None:
    """A syntactically valid op whose value nests deep (below json's own recursion limit)
    must not raise when its record is built or written (asdict once recursed into it)."""
    text = '{"op": "write", "key": "k", "value": ' + "[" * depth + "]" * depth + "}"
    rec = parse_both(text, STORE)
    for rule in ("strict", "lenient"):
        out = rec[rule]
        assert out["valid"] is (out["op"] is not None)
        if out["valid"]:
            assert json.dumps(out["op"]["value"]) == "[" * depth + "]" * depth
        else:
            assert out["error"]
    assert rec["strict"]["valid"] == rec["lenient"]["valid"]
    RunWriter(tmp_path).append_world({"world_id": "w", "run": 1},
                                     [{"world_id": "w", "run": 1, "seq": 0, "parse": rec}])
    assert len(list(read_jsonl(tmp_path / "steps.jsonl"))) == 1


# -- fuzzing ----------------------------------------------------------------------------
ALPHABET = st.sampled_from(list('{}[]":,\\`\n\t -0123456789abcopkeyvalu') + ["op", "list", "submit", "\u00e9",
                                                                            "\u2028", "\ufeff", "\U0001f600",
                                                                            "\x00", "```", "json", "null",
                                                                            "true", "NaN", "Infinity"])
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                         st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=12)
op_dicts = st.fixed_dictionaries(
    {"op": st.one_of(st.sampled_from(["list", "read", "write", "submit", "delete", ""]), json_values)},
    optional={"key": json_values, "value": json_values, "answer": json_values, "extra": json_values})


@st.composite
def adversarial(draw: st.DrawFn) -> str:
    base = draw(st.one_of(
        st.text(max_size=200),
        st.lists(ALPHABET, max_size=80).map("".join),
        op_dicts.map(lambda d: json.dumps(d, allow_nan=True)),
        op_dicts.map(lambda d: json.dumps(d, ensure_ascii=False)),
        st.integers(1, 6000).map(lambda n: "{" * n),
        st.integers(1, 6000).map(lambda n: "}" * n + "{" * n),
        st.integers(1, 2000).map(lambda n: '{"op":' * n),
        st.integers(1, 2000).map(lambda n: '{"op":"write","key":"k","value":' + "[" * n + "]" * n + "}"),
        st.integers(1, 1500).map(lambda n: '{"a":' * n + "1" + "}" * n),
        st.integers(4000, 6000).map(lambda n: '{"op":"submit","answer":' + "9" * n + "}"),
    ))
    wrap = draw(st.sampled_from(["none", "prose", "fence", "twice", "suffix", "array", "quote", "cut"]))
    prose = draw(st.text(max_size=30))
    if wrap == "prose":
        return prose + "\n" + base
    if wrap == "fence":
        return f"```json\n{base}\n```"
    if wrap == "twice":
        return base + prose + base
    if wrap == "suffix":
        return base + prose
    if wrap == "array":
        return f"[{base}]"
    if wrap == "quote":
        return json.dumps(base)
    if wrap == "cut" and base:
        return base[: draw(st.integers(0, len(base)))]
    return base


def _check_outcome(out: ParseOutcome, rule: str, ops: tuple[str, ...]) -> None:
    assert isinstance(out, ParseOutcome)
    assert out.rule == rule
    assert isinstance(out.valid, bool)
    if out.valid:
        assert isinstance(out.op, dict)
        assert out.op["op"] in ops
        assert out.error is None
        allowed_fields = {"list": {"op"}, "read": {"op", "key"}, "write": {"op", "key", "value"},
                          "submit": {"op", "answer"}}[out.op["op"]]
        assert set(out.op) == allowed_fields
        if "key" in out.op:
            assert isinstance(out.op["key"], str) and 0 < len(out.op["key"]) <= 200
    else:
        assert out.op is None
        assert isinstance(out.error, str) and out.error


def _canon(value) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=True)


FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(text=st.one_of(adversarial(), st.text()), ops=st.sampled_from([STORE, NO_STORE]))
def test_parser_never_raises_and_records_are_well_formed(text: str, ops: tuple[str, ...]) -> None:
    outs = {}
    for rule in ("strict", "lenient"):
        outs[rule] = parse_reply(text, rule, ops)
        _check_outcome(outs[rule], rule, ops)
    shape = reply_shape(text)
    assert shape.n_objects >= 0
    assert shape.multi_object == (shape.n_objects > 1)
    assert shape.empty == (not text.strip())
    if shape.empty:
        assert not outs["strict"].valid and not outs["lenient"].valid
    # a reply that is one JSON object is also what the lenient rule takes
    if outs["strict"].valid:
        assert outs["lenient"].valid and outs["lenient"].op == outs["strict"].op
        assert shape.n_objects == 1 and not shape.multi_object and not shape.prose_wrapped
    # two or more top-level objects can never be one valid object under strict
    if shape.multi_object:
        assert not outs["strict"].valid
    if "{" not in text:
        assert not outs["lenient"].valid and shape.n_objects == 0
    rec = parse_both(text, ops)
    assert set(rec) == {"strict", "lenient", "shape"}
    for rule in ("strict", "lenient"):  # compared as JSON text: NaN != NaN
        assert _canon(rec[rule]) == _canon(outs[rule].to_record())
    assert set(rec["shape"]) == {"n_objects", "multi_object", "fenced", "prose_wrapped", "empty"}
    # the record must survive a JSON round trip (it is what a run stores)
    json.loads(json.dumps(rec, allow_nan=True))


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(["list", "read", "write", "submit"]), key=st.text(min_size=1, max_size=40),
       value=json_values, prose=st.text(alphabet=st.characters(exclude_characters="{}`"), min_size=1, max_size=40))
def test_well_formed_ops_round_trip(op: str, key: str, value, prose: str) -> None:
    body = {"op": op}
    if op in ("read", "write"):
        body["key"] = key
    if op == "write":
        body["value"] = value
    if op == "submit":
        body["answer"] = value
    text = json.dumps(body)
    out = parse_reply(text, "strict", STORE)
    assert out.valid, out
    # NaN != NaN, so compare through JSON text
    assert json.dumps(out.op, sort_keys=True) == json.dumps(body, sort_keys=True)
    assume(prose.strip())
    wrapped = prose + "\n" + text
    assert not parse_reply(wrapped, "strict", STORE).valid
    lenient = parse_reply(wrapped, "lenient", STORE)
    assert lenient.valid and json.dumps(lenient.op, sort_keys=True) == json.dumps(body, sort_keys=True)
    assert reply_shape(wrapped).prose_wrapped
    fenced = f"```json\n{text}\n```"
    assert reply_shape(fenced).fenced and parse_reply(fenced, "lenient", STORE).valid
    multi = text + "\n" + text
    assert reply_shape(multi).multi_object
    assert not parse_reply(multi, "strict", STORE).valid and not parse_reply(multi, "lenient", STORE).valid


def test_deep_nesting_is_handled_quickly() -> None:
    import time

    for text in ("{" * 5000, '{"op":' * 5000, '{"a":' * 5000 + "1" + "}" * 5000, "[" * 5000 + "{" + "]" * 5000):
        t0 = time.perf_counter()
        rec = parse_both(text, STORE)
        assert not rec["strict"]["valid"] and not rec["lenient"]["valid"]
        assert time.perf_counter() - t0 < 5.0


# -- answer matching ----------------------------------------------------------------------
ANSWERS = [
    # answer, expected, one-integer, exact
    ("42", 42, True, True),
    (42, 42, True, True),
    (" 42 ", 42, True, True),
    ("42\n", 42, True, True),
    ("The answer is 42", 42, True, False),
    ("The answer is 42.", 42, True, False),
    ("42 or 43", 42, False, False),
    ("43", 42, False, False),
    (43, 42, False, False),
    ("1042", 42, False, False),
    ("42.0", 42, False, False),
    (42.0, 42, False, False),
    ("-42", 42, False, False),
    ("-42", -42, True, True),
    (-42, -42, True, True),
    (True, 1, False, False),
    (True, 42, False, False),
    (False, 0, False, False),
    (None, 0, False, False),
    ("", 0, False, False),
    ("forty-two", 42, False, False),
    ("X = 6 × 7 = 42", 42, False, False),
]


@pytest.mark.parametrize(("answer", "expected", "one_integer", "exact"), ANSWERS,
                         ids=[f"{a!r}->{e}" for a, e, *_ in ANSWERS])
def test_is_correct(answer, expected: int, one_integer: bool, exact: bool) -> None:
    assert is_correct(answer, expected, "one-integer") is one_integer
    assert is_correct(answer, expected, "exact") is exact


def test_is_correct_unknown_rule() -> None:
    with pytest.raises(ValueError, match="rule"):
        is_correct("42", 42, "close-enough")


@settings(max_examples=300, deadline=None)
@given(expected=st.integers(-10**12, 10**12), prose=st.text(alphabet=st.characters(categories=["L", "Zs", "P"],
                                                                                   exclude_characters="-"),
                                                            max_size=20))
def test_is_correct_properties(expected: int, prose: str) -> None:
    assert is_correct(expected, expected, "exact") and is_correct(expected, expected, "one-integer")
    assert is_correct(str(expected), expected, "exact")
    assert not is_correct(expected + 1, expected, "exact")
    assert not is_correct(expected + 1, expected, "one-integer")
    # prose around one integer: fine for one-integer, never for exact (unless the prose is blank)
    text = f"{prose} {expected} {prose}"
    assert is_correct(text, expected, "one-integer")
    assert is_correct(text, expected, "exact") == (not prose.strip())
    # two integers is never one-integer
    assert not is_correct(f"{expected} {expected + 1}", expected, "one-integer")


# -- parse_both's single-decode shortcut ----------------------------------------------------
def _parse_both_long_way(text: object, ops: tuple[str, ...]) -> dict:
    """Each rule and the shape computed on its own: what parse_both must equal."""
    from workbench.records import as_record
    from workbench.worlds.stigmergy.parsing import ReplyShape

    shape = reply_shape(text) if isinstance(text, str) else ReplyShape(empty=True)
    return {"strict": parse_reply(text, "strict", ops).to_record(),  # type: ignore[arg-type]
            "lenient": parse_reply(text, "lenient", ops).to_record(),  # type: ignore[arg-type]
            "shape": as_record(shape)}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_parse_both_equals_each_rule_on_its_own(case: tuple) -> None:
    text, ops = case[1], case[2]
    for t in (text, f"  {text}\n", f"\u2003{text}\x1f", text.replace("{", "{ ", 1)):
        assert parse_both(t, ops) == _parse_both_long_way(t, ops), t


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(obj=st.dictionaries(st.sampled_from(["op", "key", "value", "answer", "x"]),
                           st.one_of(st.sampled_from(["list", "read", "write", "submit", "nope"]),
                                     st.integers(), st.text(max_size=5), st.none()), max_size=4),
       before=st.sampled_from(["", " ", "\n", "ok ", "```json\n", "{"]),
       after=st.sampled_from(["", " ", "\n", " done", "\n```", "}", ' {"op": "list"}']))
def test_parse_both_equals_each_rule_on_its_own_for_generated_replies(obj: dict, before: str, after: str) -> None:
    text = before + json.dumps(obj) + after
    assert parse_both(text, STORE) == _parse_both_long_way(text, STORE)
    assert parse_both(text, NO_STORE) == _parse_both_long_way(text, NO_STORE)


def _from_depth(k: int, f):  # noqa: ANN001, ANN202 - f called k frames deeper
    return f() if k == 0 else _from_depth(k - 1, f)


def test_deep_json_gets_one_answer_from_any_caller():
    """Near the interpreter's recursion limit json's decoder answered by how deep the caller
    was (RecursionError from one path, a syntax error from a frame shallower; a fuzz example
    found it). Text nested deeper than DECODE_DEPTH is refused before decoding, so every
    caller records the same outcome."""
    texts = [t for n in (*range(250, 270), *range(960, 1020, 3)) for t in (
        "[" + '{"op":' * n + "]", '{"a":' * n + "1" + "}" * n,
        '{"op":"write","key":"k","value":' + "[" * n + "]" * n + "}")]
    for text in texts:
        for rule in ("strict", "lenient"):
            here = parse_reply(text, rule, STORE).to_record()
            assert _from_depth(60, lambda t=text, r=rule: parse_reply(t, r, STORE).to_record()) == here
            assert parse_both(text, STORE)[rule] == here
    deep = parse_reply('{"a":' * 300 + "1" + "}" * 300, "strict", STORE)
    assert not deep.valid and deep.error == f"not valid JSON (nested deeper than {DECODE_DEPTH} levels)"
    # brackets inside strings are text, not nesting: this one decodes (and is refused as an operation)
    inside = parse_reply('{"op": "note", "x": "' + "{[" * 400 + '"}', "strict", STORE)
    assert inside.error == "unknown operation 'note'"
