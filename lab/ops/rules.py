"""The dispatch table's format: an ordered list of rules, each a condition on the shape and the path (with its
configuration) that serves the shapes it matches. The first rule that matches and whose path can serve the shape
wins; a shape no rule serves goes to cuBLAS (the last fallback, which serves everything). The table is data,
not code, so a student can hand one in (exercise 09) and an instructor can load it without running anything.

    {"rules": [
      {"when": {"max_m": 16}, "path": "decode"},
      {"when": {"max_tiles": 32, "min_k": 8192}, "path": "split_k", "config": {"splits": 0}},
      {"when": {}, "path": "persistent", "config": {"BN": 256}}
    ]}

Conditions (all of a rule's must hold; a rule with none matches everything):
  min_m, max_m, min_n, max_n, min_k, max_k    the GEMM's sizes, inclusive
  min_tiles, max_tiles                        output tiles of 128 x 128 (ceil(M/128) * ceil(N/128))
  min_k_over_mn                               K / max(M, N): how K-heavy the shape is
  max_last_wave                               the last wave's share of the SMs with 128 x 256 tiles (0 < x <= 1;
                                              1.0 also matches shapes whose tiles fill whole waves)
  aligned                                     true: TMA reads A and B as they are (16-byte bases and rows)
  epilogue                                    true: the call has a bias, activation or residual
  dtype                                       "float16" or "bfloat16"
  layout                                      "NN" (B is K x N) or "TN" (B is N x K, a linear layer's weight)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lab.core.errors import LabError

PATHS = ("decode", "split_k", "persistent", "hopper", "stream_k", "generic", "cublas")
# Each path's configuration keys and the values they take (checked when a table is loaded).
CONFIGS = {
    "decode": {},
    "split_k": {"splits": range(0, 257)},  # 0: the launcher's choice (about one wave of units)
    "persistent": {"BN": (128, 256), "GROUP_M": (1, 2, 4, 8, 16)},
    "hopper": {},  # the family picks the build per shape (GemmTcFamily.scheduled)
    "stream_k": {},
    "generic": {},
    "cublas": {},
}
INT_CONDITIONS = ("min_m", "max_m", "min_n", "max_n", "min_k", "max_k", "min_tiles", "max_tiles")
FLOAT_CONDITIONS = ("min_k_over_mn", "max_last_wave")
BOOL_CONDITIONS = ("aligned", "epilogue")
CHOICE_CONDITIONS = {"dtype": ("float16", "bfloat16"), "layout": ("NN", "TN")}
MAX_RULES = 64


@dataclass(frozen=True)
class Rule:
    when: tuple[tuple[str, object], ...]
    path: str
    config: tuple[tuple[str, int], ...] = ()

    def matches(self, shape) -> bool:
        return all(_holds(name, value, shape) for name, value in self.when)

    def describe(self) -> str:
        cond = ", ".join(f"{k}={v}" for k, v in self.when) or "any shape"
        cfg = " ".join(f"{k}={v}" for k, v in self.config)
        return f"{cond} -> {self.path}{' ' + cfg if cfg else ''}"


@dataclass(frozen=True)
class Table:
    rules: tuple[Rule, ...]
    source: str = field(default="built-in", compare=False)
    notes: tuple[str, ...] = field(default=(), compare=False)  # each rule's "note" (why it is there), "" where none

    def to_json(self) -> dict:
        return {"rules": [{"when": dict(r.when), "path": r.path, **({"config": dict(r.config)} if r.config else {})}
                          for r in self.rules]}


def _holds(name: str, value, shape) -> bool:
    if name.startswith(("min_", "max_")) and name[4:] in ("m", "n", "k"):
        size = {"m": shape.M, "n": shape.N, "k": shape.K}[name[4:]]
        return size >= value if name.startswith("min_") else size <= value
    if name == "min_tiles":
        return shape.tiles >= value
    if name == "max_tiles":
        return shape.tiles <= value
    if name == "min_k_over_mn":
        return shape.K / max(shape.M, shape.N) >= value
    if name == "max_last_wave":
        return shape.last_wave <= value
    if name == "aligned":
        return shape.aligned == value
    if name == "epilogue":
        return (shape.epilogue != "none") == value
    return getattr(shape, name) == value  # dtype, layout


def parse(payload: dict, source: str = "a dispatch table") -> Table:
    """A Table from its JSON form, or one LabError sentence naming the first thing wrong in it."""
    if not isinstance(payload, dict) or not isinstance(payload.get("rules"), list):
        raise LabError(f"{source} must be a JSON object with a list under \"rules\".")
    if not payload["rules"] or len(payload["rules"]) > MAX_RULES:
        raise LabError(f"{source} needs between 1 and {MAX_RULES} rules; it has {len(payload['rules'])}.")
    rules = tuple(_parse_rule(r, i, source) for i, r in enumerate(payload["rules"], 1))
    notes = tuple(str(r.get("note", "")) for r in payload["rules"])
    return Table(rules, source, notes)


def _parse_rule(raw, i: int, source: str) -> Rule:
    where = f"{source}, rule {i}"
    if not isinstance(raw, dict) or set(raw) - {"when", "path", "config", "note"}:
        raise LabError(f"{where}: a rule is an object with \"when\", \"path\" and optionally \"config\" and "
                       "\"note\".")
    path = raw.get("path")
    if path not in PATHS:
        raise LabError(f"{where}: path {path!r} is not one of {', '.join(PATHS)}.")
    when = raw.get("when", {})
    if not isinstance(when, dict):
        raise LabError(f"{where}: \"when\" must be an object of conditions (an empty one matches every shape).")
    conds = []
    for name, value in when.items():
        conds.append((name, _condition_value(name, value, where)))
    config = raw.get("config", {})
    if not isinstance(config, dict):
        raise LabError(f"{where}: \"config\" must be an object.")
    allowed = CONFIGS[path]
    cfg = []
    for name, value in config.items():
        if name not in allowed:
            keys = ", ".join(allowed) or "none"
            raise LabError(f"{where}: path {path} has no setting {name!r} (its settings: {keys}).")
        if isinstance(value, bool) or not isinstance(value, int) or value not in allowed[name]:
            shown = (f"{allowed[name].start}..{allowed[name].stop - 1}" if isinstance(allowed[name], range)
                     else ", ".join(map(str, allowed[name])))
            raise LabError(f"{where}: {path}'s {name} must be one of {shown}; got {value!r}.")
        cfg.append((name, value))
    return Rule(tuple(conds), path, tuple(sorted(cfg)))


def _condition_value(name: str, value, where: str):
    if name in INT_CONDITIONS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise LabError(f"{where}: {name} must be a whole number >= 0; got {value!r}.")
        return value
    if name in FLOAT_CONDITIONS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise LabError(f"{where}: {name} must be a positive number; got {value!r}.")
        return float(value)
    if name in BOOL_CONDITIONS:
        if not isinstance(value, bool):
            raise LabError(f"{where}: {name} must be true or false; got {value!r}.")
        return value
    if name in CHOICE_CONDITIONS:
        if value not in CHOICE_CONDITIONS[name]:
            raise LabError(f"{where}: {name} must be one of {', '.join(CHOICE_CONDITIONS[name])}; got {value!r}.")
        return value
    known = ", ".join((*INT_CONDITIONS, *FLOAT_CONDITIONS, *BOOL_CONDITIONS, *CHOICE_CONDITIONS))
    raise LabError(f"{where}: unknown condition {name!r}; the conditions are {known}.")


MAX_TABLE_BYTES = 1 << 20
MAX_DEPTH = 16  # a table nests three deep (table, rules, rule, when/config); anything deeper is not a table
MAX_INT_DIGITS = 12


def load(path: str | Path) -> Table:
    """A table from a JSON file, read strictly: a missing, oversized or non-UTF-8 file, JSON that is not standard
    (NaN, Infinity, a key given twice), nesting past MAX_DEPTH or an integer of more than MAX_INT_DIGITS digits is
    one sentence, as a bad rule is, and is checked in time linear in the file's size."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TABLE_BYTES + 1)
    except OSError as exc:
        raise LabError(f"Cannot read the dispatch table {path}: {exc.strerror}.") from None
    return parse(strict_json(data, str(path)), str(path))


def strict_json(data: bytes, where: str):
    """The JSON value in `data`, or one LabError sentence: standard JSON only, UTF-8, bounded size, depth and
    integer length, no key twice in one object."""
    if len(data) > MAX_TABLE_BYTES:
        raise LabError(f"{where} is larger than {MAX_TABLE_BYTES // 1024} KiB; a dispatch table is a few rules.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LabError(f"{where} is not UTF-8 (byte {exc.start} is {data[exc.start]:#04x}); save it as UTF-8."
                       ) from None
    depth = _max_depth(text)
    if depth > MAX_DEPTH:
        raise LabError(f"{where} nests {depth} levels deep; a dispatch table needs 4 (write it as the README shows).")

    def constant(name):
        raise LabError(f"{where} holds {name}, which standard JSON does not have; write a number.")

    def integer(digits):
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise LabError(f"{where} holds an integer of {len(digits.lstrip('-'))} digits; the settings a table takes "
                           f"have at most {MAX_INT_DIGITS}.")
        return int(digits)

    def unique(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise LabError(f"{where} gives the key {key[:40]!r} twice in one object; keep one.")
            seen[key] = value
        return seen

    try:
        return json.loads(text, parse_constant=constant, parse_int=integer, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise LabError(f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}.") from None


def _max_depth(text: str) -> int:
    """How deep brackets nest outside strings (one pass; JSON strings only escape with a backslash)."""
    depth = deepest = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


# The lab's own table, written by `lab tune --table` (lab.studies.ops_sweep) from a measured sweep over shape classes:
# each
# rule's note names the class, the path that won it and the record that holds the times. The autotune cache, where
# it holds an entry for a shape's bucket, overrides the table.
DEFAULT_FILE = Path(__file__).with_name("default_table.json")
DEFAULT = parse(json.loads(DEFAULT_FILE.read_text()), "lab.ops.rules.DEFAULT")
