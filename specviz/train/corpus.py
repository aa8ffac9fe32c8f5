"""Real text installed on the training machine, to widen the distillation prompts beyond the templates of
`prompts.py`.

Three sources, each read in a fixed order so a seed gives the same prompts on the same machine:
- words: whole-word tokens of the target's own vocabulary (lower-case, >= 5 letters), as topics;
- German: sentences of the German manual pages (Debian's manpages-de, /usr/share/man/de), as text to
  translate; empty where they are not installed;
- code: short functions of the Python standard library (`inspect.getsource`), as code to explain,
  test, fix or port.
"""

from __future__ import annotations

import gzip
import importlib
import inspect
import re
from pathlib import Path

GERMAN_MAN = Path("/usr/share/man/de")
STDLIB_MODULES = (
    "bisect",
    "heapq",
    "textwrap",
    "statistics",
    "fractions",
    "string",
    "difflib",
    "shlex",
    "calendar",
    "colorsys",
    "csv",
    "pprint",
    "functools",
    "json.decoder",
    "json.encoder",
    "ipaddress",
    "random",
    "copy",
    "glob",
    "fnmatch",
    "posixpath",
    "html",
    "base64",
    "quopri",
    "netrc",
    "graphlib",
    "operator",
    "keyword",
    "reprlib",
    "dataclasses",
    "enum",
    "urllib.parse",
    "email.utils",
    "zipfile",
)
_GERMAN = re.compile(r"\b(der|die|das|und|ist|nicht|mit|wird|werden|eine?|Sie)\b")
_GROFF = re.compile(r"\\f[A-Z]|\\f\(..|\\[|&^]|\\\*\(..|\\\*.|\\s[-+]?\d")


def vocabulary_words(tokenizer) -> list[str]:
    """Sorted lower-case words (>= 5 letters) that are single tokens with a leading space."""
    words = set()
    for tok_id in range(len(tokenizer)):
        text = tokenizer.decode([tok_id])
        if text.startswith(" ") and text[1:].isalpha() and text[1:].islower() and text[1:].isascii() and len(text) >= 6:
            words.add(text[1:])
    return sorted(words)


def _roff_text(raw: str) -> str:
    lines = [ln for ln in raw.splitlines() if not ln.startswith((".", "'"))]
    text = " ".join(lines).replace("\\-", "-").replace("\\e", "\\").replace("\\(aq", "'")
    return re.sub(r"\s+", " ", _GROFF.sub("", text))


def _prose(page: Path, max_words: int) -> list[str]:
    """The plain-prose sentences (8..max_words words, no option syntax) of one gzipped manual page."""
    try:
        text = _roff_text(gzip.decompress(page.read_bytes()).decode("utf-8", "replace"))
    except (OSError, EOFError):
        return []
    return [
        s
        for s in re.split(r"(?<=[.!?])\s+(?=[A-ZÄÖÜ])", text)
        if 8 <= len(s.split()) <= max_words and s.endswith(".") and not re.search(r"[\\/=<>{}\[\]_|*]|--?\w", s)
    ]


def german_sentences(folder: Path = GERMAN_MAN, max_words: int = 30) -> list[str]:
    """Sorted distinct German prose sentences of the German manual pages (English leftovers dropped)."""
    pages = sorted(folder.glob("man*/*.gz")) if folder.is_dir() else []
    return sorted({s for p in pages for s in _prose(p, max_words) if _GERMAN.search(s)})


def stdlib_functions(max_lines: int = 30) -> list[str]:
    """Source of the standard library's public functions of 4..max_lines lines, in module order."""
    out = []
    for name in STDLIB_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for attr, obj in sorted(vars(mod).items()):
            if attr.startswith("_") or not inspect.isfunction(obj) or obj.__module__ != mod.__name__:
                continue
            try:
                src = inspect.getsource(obj)
            except (OSError, TypeError):
                continue
            if 4 <= src.count("\n") <= max_lines:
                out.append(src.rstrip())
    return out
