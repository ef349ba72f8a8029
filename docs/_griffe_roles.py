"""A griffe extension for the documentation build: Sphinx cross-reference roles become links, and numpy-style
``name : description`` entries keep their description.

The docstrings cross-reference with Sphinx roles (``:func:`bayesvm.log_evidence```, ``:class:`~a.b.C```,
``:mod:`a.b```). mkdocstrings' Python handler renders those as plain text; this extension rewrites each role
into an optional autorefs reference (``<autoref identifier="a.b.C" optional>``), which mkdocs-autorefs turns into
a link where the object is rendered on some page of the site and into plain code where it is not. Names that are
not fully qualified are resolved in the scope of the object whose docstring holds them.

The docstrings' Parameters and Attributes sections write ``name : what it is`` on one line (numpydoc's type slot
holding the description); griffe would show that text as the type. Entries whose text after the colon is not a
plain type (``int``, ``float``, ``np.ndarray``, ``str | None``, ...) are rewritten as a name with an indented
description.

Loaded by mkdocs.yml (``plugins: mkdocstrings: handlers: python: options: extensions``); not part of the package.
"""

from __future__ import annotations

import html
import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const|type):`(?P<body>[^`]+)`")
EXPLICIT = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^>]+)>$")


SECTIONS = {"Parameters", "Attributes", "Other Parameters", "Keyword Arguments"}
ENTRY = re.compile(r"^(?P<indent>\s*)(?P<name>\*{0,2}[A-Za-z_][\w, *]*?) : (?P<rest>.+)$")
TYPE_WORDS = {"int", "float", "str", "bool", "none", "optional", "or", "array", "array-like", "callable", "dict",
              "list", "tuple", "object", "sequence", "iterable"}


def _is_type(text: str) -> bool:
    tokens = [t for t in re.split(r"[\s,|]+", text.strip()) if t]
    return bool(tokens) and len(tokens) <= 4 and all(
        t.lower() in TYPE_WORDS or "." in t or "[" in t or t[:1].isupper() and t.isidentifier() for t in tokens)


def _descriptions(text: str) -> str:
    lines = text.split("\n")
    out, section, indent = [], None, None
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and set(following.strip()) == {"-"} and len(following.strip()) >= 3:
            section, indent = line.strip(), len(line) - len(line.lstrip())
        elif section in SECTIONS and (match := ENTRY.match(line)) and len(match["indent"]) == indent \
                and not _is_type(match["rest"]):
            out.append(f"{match['indent']}{match['name']}")
            out.append(f"{match['indent']}    {match['rest']}")
            continue
        out.append(line)
    return "\n".join(out)


def _rewrite(text: str, obj: griffe.Object) -> str:
    def replace(match: re.Match) -> str:
        body = match["body"].strip()
        explicit = EXPLICIT.match(body)
        if explicit:
            title, target = explicit["title"], explicit["target"]
        else:
            target = body.lstrip("~.")
            title = target.rsplit(".", 1)[-1] if body.startswith("~") else target
        target = target.lstrip("~.").removesuffix("()")
        head = target.split(".", 1)[0]
        if head != obj.package.name:
            try:
                resolved = obj.resolve(head)
            except Exception:  # not in scope: leave the name as written (rendered as code if unresolved)
                resolved = None
            if resolved:
                target = resolved + target[len(head):]
        return (f'<autoref identifier="{html.escape(target)}" optional>'
                f"<code>{html.escape(title)}</code></autoref>")

    return ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring of a loaded package into optional autorefs references."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = _rewrite(_descriptions(obj.docstring.value), obj)
            stack.extend(member for member in obj.members.values() if not member.is_alias)
