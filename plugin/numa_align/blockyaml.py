"""The YAML a kubeconfig is written in, read without a YAML library (numa-align depends on grpcio, protobuf and
prometheus-client only).

kubectl, client-go and PyYAML's safe_dump write kubeconfigs in block style: mappings and sequences by
indentation (a sequence may sit at its key's own indentation), plain or quoted scalars on the key's line,
`{}` and `[]` for empty collections. That subset is read here; anything else (anchors, tags, block scalars,
flow collections, multi-line scalars) raises BlockYamlError naming the line, so a kubeconfig is never half
read. A document that starts with `{` is JSON, which `kubectl config view --raw -o json` prints.
"""

from __future__ import annotations

import json
from typing import Any

_Line = tuple[int, str, int]
"""(indentation, text without it, line number)."""
_NULLS = ("", "~", "null", "Null", "NULL")
_BOOLEANS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_UNSUPPORTED = tuple("{[&*!|>%@`")


class BlockYamlError(ValueError):
    """The text is not the block-style YAML (or JSON) a kubeconfig is written in; str() names the line."""


def parse(text: str) -> Any:
    """The document in `text`: dicts, lists, str, bool and None (numbers stay strings)."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise BlockYamlError(f"line {exc.lineno}: not JSON: {exc.msg}") from None
    lines: list[_Line] = []
    for number, raw in enumerate(text.splitlines(), 1):
        body = raw.lstrip(" ")
        if not body.strip() or body.startswith("#") or (not lines and body.rstrip() == "---"):
            continue
        if body.startswith("\t"):
            raise BlockYamlError(f"line {number}: a tab in the indentation")
        lines.append((len(raw) - len(body), body.rstrip(), number))
    if not lines:
        return None
    value, end = _block(lines, 0, lines[0][0])
    if end < len(lines):
        raise BlockYamlError(f"line {lines[end][2]}: unexpected indentation or a second document")
    return value


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _block(lines: list[_Line], i: int, indent: int) -> tuple[Any, int]:
    if _is_item(lines[i][1]):
        return _sequence(lines, i, indent)
    return _mapping(lines, i, indent)


def _sequence(lines: list[_Line], i: int, indent: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while i < len(lines) and lines[i][0] == indent and _is_item(lines[i][1]):
        text, number = lines[i][1], lines[i][2]
        rest = text[1:].lstrip(" ")
        if not rest:
            value, i = _nested(lines, i + 1, indent)
        elif _is_item(rest) or _split_key(rest, number) is not None:
            # A collection opening on the item's line continues at the column of its first entry.
            column = indent + len(text) - len(rest)
            lines[i] = (column, rest, number)
            value, i = _block(lines, i, column)
        else:
            value, i = _scalar(rest, number), i + 1
        items.append(value)
    return items, i


def _mapping(lines: list[_Line], i: int, indent: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == indent and not _is_item(lines[i][1]):
        text, number = lines[i][1], lines[i][2]
        split = _split_key(text, number)
        if split is None:
            raise BlockYamlError(f"line {number}: expected 'key: value', got {text!r}")
        key, rest = split
        if key in result:
            raise BlockYamlError(f"line {number}: key {key!r} given twice")
        if rest:
            result[key], i = _scalar(rest, number), i + 1
        elif i + 1 < len(lines) and lines[i + 1][0] == indent and _is_item(lines[i + 1][1]):
            result[key], i = _sequence(lines, i + 1, indent)  # kubectl's style: "- " under the key's column
        else:
            result[key], i = _nested(lines, i + 1, indent)
    if i < len(lines) and lines[i][0] > indent:
        raise BlockYamlError(f"line {lines[i][2]}: unexpected indentation (multi-line values are not read)")
    return result, i


def _nested(lines: list[_Line], i: int, parent: int) -> tuple[Any, int]:
    """The collection indented under a key or item, or None when the next line is not indented further."""
    if i < len(lines) and lines[i][0] > parent:
        return _block(lines, i, lines[i][0])
    return None, i


def _split_key(text: str, number: int) -> tuple[str, str] | None:
    """(key, rest of the line) of `key: value` or `key:`, or None when the text is a plain scalar."""
    if text[0] in "'\"":
        key, end = _quoted(text, number)
        rest = text[end:].lstrip(" ")
        if not rest.startswith(":"):
            return None
        return key, rest[1:].strip()
    for at, char in enumerate(text):
        if char == ":" and (at + 1 == len(text) or text[at + 1] == " "):
            return text[:at].rstrip(), text[at + 1:].strip()
        if char == "#" and at and text[at - 1] == " ":
            return None
    return None


def _quoted(text: str, number: int) -> tuple[str, int]:
    """The value of the quoted scalar that opens `text`, and the index just after its closing quote."""
    quote = text[0]
    at = 1
    while at < len(text):
        if quote == "'" and text[at] == "'":
            if text[at + 1:at + 2] == "'":
                at += 2
                continue
            return text[1:at].replace("''", "'"), at + 1
        if quote == '"' and text[at] == "\\":
            at += 2
            continue
        if quote == '"' and text[at] == '"':
            try:
                return json.loads(text[:at + 1]), at + 1
            except json.JSONDecodeError:
                raise BlockYamlError(f"line {number}: an escape JSON does not know in {text[:at + 1]}") from None
        at += 1
    raise BlockYamlError(f"line {number}: unterminated quoted string")


def _scalar(text: str, number: int) -> Any:
    if text[0] in "'\"":
        value, end = _quoted(text, number)
        rest = text[end:].strip()
        if rest and not rest.startswith("#"):
            raise BlockYamlError(f"line {number}: text after a quoted string: {rest!r}")
        return value
    if text in ("{}", "[]"):
        return {} if text == "{}" else []
    if text.startswith(_UNSUPPORTED):
        raise BlockYamlError(f"line {number}: {text[:20]!r}: flow collections, anchors, aliases, tags and "
                             "block scalars are not read")
    cut = text.find(" #")
    value = text if cut < 0 else text[:cut].rstrip()
    if value in _NULLS:
        return None
    return _BOOLEANS.get(value, value)
