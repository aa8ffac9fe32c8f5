"""A model card: the sections a training command generates, then the sections people keep by hand.

The trainers rewrite their folder's README.md after every run and evaluation (`--eval-only`). The card's history
(earlier stages, acceptance heads, experiments) is written by hand below the generated sections, and survives
each rewrite: every `## ` section of the old card whose heading (up to any parenthesis) the new text does not
generate is kept, in order, after it.
"""

from __future__ import annotations

from pathlib import Path


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading line, whole section text) of each `## ` section; the text before the first is not one."""
    out, heading, lines = [], None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            if heading is not None:
                out.append((heading, "".join(lines)))
            heading, lines = line.strip(), []
        if heading is not None:
            lines.append(line)
    if heading is not None:
        out.append((heading, "".join(lines)))
    return out


def _title(heading: str) -> str:
    return heading.split(" (")[0]  # "## Recipe (seed 0)" and "## Recipe (seed 1)" are one section


def write_card(path: Path, generated: str) -> None:
    """Write `generated` to `path`, followed by the hand-kept sections of the card already there."""
    made = {_title(h) for h, _ in _sections(generated)}
    kept = [body for h, body in _sections(path.read_text()) if _title(h) not in made] if path.exists() else []
    text = generated.rstrip("\n") + "\n"
    if kept:
        text += "\n" + "".join(kept).rstrip("\n") + "\n"
    path.write_text(text)
