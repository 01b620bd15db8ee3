"""The metric names a PromQL expression selects (a small tokenizer, not a full parser).

A name is an identifier outside strings, label matchers `{...}` and range or subquery brackets
`[...]`, that is not a function or aggregation (followed by `(`), not a keyword or operator word,
and not inside the label list of `by`, `without`, `on`, `ignoring`, `group_left`, `group_right`.
`{__name__="x"}` selectors are read too. Grafana's `$__range`-style variables only appear in
brackets and are skipped with them.
"""

import re

_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NUMBER = re.compile(r"(0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?)([smhdwy]|ms)*")
_LABEL_LIST_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_KEYWORDS = {
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "atan2",
    "inf",
    "nan",
    "start",
    "end",
    *_LABEL_LIST_WORDS,
}
_AGGREGATIONS = {
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
}
_NAME_MATCHER = re.compile(r"""__name__\s*=\s*["']([^"']+)["']""")


class PromqlError(ValueError):
    """The expression is not tokenizable (an unclosed string or bracket)."""


def _skip_string(expr: str, i: int) -> int:
    quote = expr[i]
    j = i + 1
    while j < len(expr):
        if expr[j] == "\\" and quote != "`":
            j += 2
            continue
        if expr[j] == quote:
            return j + 1
        j += 1
    raise PromqlError(f"unclosed string at {i}: {expr!r}")


def _skip_group(expr: str, i: int, close: str) -> tuple[int, str]:
    """From an opening bracket at i to just past its match; returns (end, contents)."""
    depth, j = 0, i
    opening = expr[i]
    while j < len(expr):
        c = expr[j]
        if c in "\"'`":
            j = _skip_string(expr, j)
            continue
        if c == opening:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j + 1, expr[i + 1 : j]
        j += 1
    raise PromqlError(f"unclosed {opening!r} at {i}: {expr!r}")


def metric_names(expr: str) -> set[str]:
    """Every metric name `expr` selects."""
    names: set[str] = set()
    i, n = 0, len(expr)
    expect_label_list = False
    while i < n:
        c = expr[i]
        if c.isspace():
            i += 1
        elif c in "\"'`":
            i = _skip_string(expr, i)
        elif c == "{":
            i, inner = _skip_group(expr, i, "}")
            names.update(_NAME_MATCHER.findall(inner))
        elif c == "[":
            i, _ = _skip_group(expr, i, "]")
        elif c == "(" and expect_label_list:
            i, _ = _skip_group(expr, i, ")")
            expect_label_list = False
        elif (match := _NUMBER.match(expr, i)) and match.end() > i and not c.isalpha() and c != "_":
            i = match.end()
        elif match := _IDENT.match(expr, i):
            word = match.group()
            i = match.end()
            rest = expr[i:].lstrip()
            if word in _LABEL_LIST_WORDS:
                expect_label_list = True
            elif word.lower() in _KEYWORDS or rest.startswith("("):
                pass
            elif word in _AGGREGATIONS and re.match(r"(by|without)\b", rest):
                pass  # `sum by (x) (...)`: the label list follows
            else:
                names.add(word)
        else:
            i += 1
    return names
