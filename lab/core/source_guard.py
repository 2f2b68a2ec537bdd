"""What a kernel source may ask the compiler to read: the lab's own headers, by name, and nothing else.

A compile error quotes the file it happened in, so a source that gets NVRTC to open another file
(another student's kernel, the instructor's hidden.json) would read it into the grader's output. Three
layers keep that from happening, so that no single one has to be perfect:

1. lab.core.build hands NVRTC the lab's headers in memory, with no include path and `--no-source-include`:
   a relative `#include` can then only name an in-memory header, whatever the preprocessor does.
2. `check_includes` (here) reads the source the way the preprocessor's first phases do (backslash-newlines
   spliced, comments removed, digraphs and trigraphs seen as `#`) and accepts only directives that name a
   lab header as a literal. `#include MACRO`, absolute paths, `__has_include` and `#embed` are refused
   before NVRTC ever runs, which is what stops an absolute path (layer 1 cannot).
3. `foreign_files_in_log` (here): a compile log that mentions any file other than the source and the
   lab's headers is never shown; lab.core.build reports one sentence instead.
"""

from __future__ import annotations

import re

from lab.core.errors import CompileError

_DIRECTIVE = re.compile(r"^[ \t\f\v]*(?:#|%:|\?\?=)[ \t\f\v]*(?P<name>[^\s\"<]*)(?P<rest>.*)$")
_READS_FILES = ("include", "include_next", "import", "embed")


def splice_and_strip(source: str, strip_comments: bool = True) -> str:
    """The source after translation phases 1-3 as far as directives care: backslash-newlines joined
    (keeping the line count in step by re-adding the newlines at the end of the joined line), and every
    comment replaced by one space. String and character literals are kept as they are."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    logical: list[str] = []
    pending, joined = "", 0
    for line in lines:
        if line.endswith("\\"):
            pending += line[:-1]
            joined += 1
            continue
        logical.append(pending + line)
        logical.extend([""] * joined)
        pending, joined = "", 0
    if pending:
        logical.append(pending)
    text = "\n".join(logical)
    return _strip_comments(text) if strip_comments else text


def _strip_comments(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        raw = c == '"' and re.search(r'(?:^|[^A-Za-z0-9_])(?:u8|[uUL])?R$', text[max(0, i - 4):i])
        m = re.compile(r'"([^ ()\\\t\v\f\n]{0,16})\(').match(text, i) if raw else None
        if m:  # R"delim( ... )delim": nothing inside is a comment or an escape
            close = text.find(f"){m[1]}\"", m.end())
            j = n if close < 0 else close + len(m[1]) + 2
            out.append(text[i:j])
            i = j
        elif c in "\"'":  # a literal: copy it whole, escapes included
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            out.append(" ")
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            body = text[i:n if j < 0 else j + 2]
            out.append(" " + "\n" * body.count("\n"))  # keep line numbers
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


_OPERAND = re.compile(r'(?:"(?P<q>[^"]*)"|<(?P<a>[^>]*)>)[ \t]*(?://.*|/\*.*)?')
# A file-reading directive anywhere on a line, comments allowed between `#` and its name: the third reading,
# which no misjudged literal or comment can hide (a C++14 digit separator, 1'2'R"(, once made the first two
# readings see a raw string where the preprocessor saw a plain one).
_INTRODUCERS = ("#", "%:", "??=")
_FILE_DIRECTIVES = ("include_next", "include", "import", "embed")  # longest first: include_next before include


def _file_directives_anywhere(line: str):
    """(name, rest) for every file-reading directive anywhere on `line`, comments allowed between `#` (or `%:`,
    `??=`) and its name: the third reading, which no misjudged literal or comment can hide (a C++14 digit separator,
    1'2'R"(, once made the first two readings see a raw string where the preprocessor saw a plain one).

    A scan rather than a regular expression: each comment is skipped with one find, so a line of `#` followed by many
    `/**/` costs time linear in its length (a backtracking pattern took seconds on a few thousand of them)."""
    n, i = len(line), 0
    while i < n:
        hits = [(j, t) for t in _INTRODUCERS if (j := line.find(t, i)) >= 0]
        if not hits:
            return
        j, t = min(hits)
        k = j + len(t)
        while True:
            while k < n and line[k] in " \t":
                k += 1
            if line.startswith("/*", k):
                end = line.find("*/", k + 2)
                if end < 0:
                    break
                k = end + 2
                continue
            break
        for name in _FILE_DIRECTIVES:
            after = k + len(name)
            if line.startswith(name, k) and (after == n or not (line[after].isalnum() or line[after] == "_")):
                yield name, line[after:]
                break
        i = j + len(t)


def check_includes(source: str, shown: str, allowed: set[str]) -> None:
    """Raise CompileError, naming the line, unless every file the source asks for is one of `allowed`
    (bare header names) written as a literal `"name"` or `<name>`.

    Each line is read twice: with comments removed (what the preprocessor sees), and as written (so
    that a literal this reader misjudges cannot hide a directive inside what it took for a comment).
    Either reading refusing is enough."""
    names = ", ".join(sorted(allowed)) or "none"
    spliced = splice_and_strip(source, strip_comments=False).split("\n")
    for number, line in enumerate(spliced, start=1):
        for name, rest in _file_directives_anywhere(line):
            literal = _OPERAND.match(rest.strip())
            header = (literal["q"] if literal["q"] is not None else literal["a"]) if literal else None
            if header not in allowed:
                raise CompileError(f"{shown}:{number}: `#{name}{rest[:40]}` is not allowed (even inside a "
                                   f"comment or string): a kernel may include only the lab's headers ({names}), by "
                                   "name in quotes, so that no other file on this machine can be read.")
    stripped = splice_and_strip(source).split("\n")
    for lines in (stripped, spliced):
        for number, line in enumerate(lines, start=1):
            if "__has_include" in line:
                raise CompileError(f"{shown}:{number}: __has_include asks the compiler about files on this "
                                   f"machine; a kernel may use only the lab's headers ({names}), so remove it.")
            m = _DIRECTIVE.match(line)
            if not m:
                continue
            name = m["name"]
            if name and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise CompileError(f"{shown}:{number}: write the directive on this line plainly, as `#include`, "
                                   f"`#define`, ... with nothing between `#` and its name (found {name[:20]!r}).")
            if name not in _READS_FILES:
                continue
            target = m["rest"].strip()
            literal = _OPERAND.fullmatch(target)
            header = (literal["q"] if literal["q"] is not None else literal["a"]) if literal else None
            if header not in allowed:
                raise CompileError(f"{shown}:{number}: `#{name} {target}` is not allowed: a kernel may include "
                                   f"only the lab's headers ({names}), by name in quotes, so that no other file on "
                                   "this machine can be read into the compiler's output.")


_MACRO_DIRECTIVES = ("define", "undef")
_MACRO_PRAGMAS = re.compile(r"\b(?:push_macro|pop_macro)\b")
_DEFINED = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif)\b(?P<expr>.*)$", re.MULTILINE)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def defined_macros(text: str) -> set[str]:
    """Every macro name a source or header #defines or tests in an #if (comments removed first)."""
    stripped = splice_and_strip(text)
    names = {m["name"] for m in _DEFINED.finditer(stripped)}
    for m in _CONDITIONAL.finditer(stripped):
        names |= set(_IDENTIFIER.findall(m["expr"])) - {"defined"}
    return names


def check_plugin_macros(plugin: str, shown: str, reserved: set[str]) -> None:
    """Raise CompileError, naming the line, where a plugin header could change the kernel it is compiled into: any
    #undef, a #define of a name the host kernel or the lab's headers define or are built with (a knob, an EPI_*
    setting), or a push_macro/pop_macro pragma. A plugin brings functions, not configuration: the graded knobs must
    hold the values the grader gave them."""
    for number, line in enumerate(splice_and_strip(plugin).split("\n"), start=1):
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        name, rest = m["name"], m["rest"].strip()
        target = rest.split("(")[0].split()[0] if rest.split() else ""
        if name == "undef":
            raise CompileError(f"{shown}:{number}: a plugin may not #undef anything (here {target or 'a name'}): "
                               "the kernel it plugs into keeps its own configuration; remove the line.")
        if name == "define" and (target in reserved or target.startswith(("__", "LAB_", "EPI_"))):
            raise CompileError(f"{shown}:{number}: a plugin may not #define {target}, which the kernel it plugs "
                               "into defines or is built with; give your macro another name.")
        if name == "pragma" and _MACRO_PRAGMAS.search(rest):
            raise CompileError(f"{shown}:{number}: a plugin may not save or restore macros (#pragma "
                               f"{rest.split()[0] if rest.split() else ''}); remove the line.")


_LOG_FILE = re.compile(r"^(?P<file>[^\s(][^(\n]*)\(\d+\): ", re.MULTILINE)


def foreign_files_in_log(log: str, own: set[str]) -> list[str]:
    """Files the compiler's messages point into other than `own` (the source's name and the headers) and
    NVRTC's own pseudo-files (`__nv_name_map` for name expressions, `<command-line>`)."""
    named = {m["file"].strip() for m in _LOG_FILE.finditer(log)}
    return sorted(f for f in named - own if f != "__nv_name_map" and not (f.startswith("<") and f.endswith(">")))
