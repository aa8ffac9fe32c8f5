"""Token ids -> text that survives: output pieces that join to the tokenizer's decode, and labels for lone ids.

A byte-level tokenizer splits one character across tokens when its UTF-8 bytes are not one merge (most CJK,
emoji, some accents), so decoding ids one at a time turns each part into "\ufffd". Two answers, for two uses:

- `Detokenizer.pieces(ids)`: the text each output token adds, as streaming detokenizers find it: decode a
  short window that ends at the new token, and hold the text back while it ends in a partial character. A
  held token's piece is "" and the token that completes the character carries it. ``"".join(pieces)`` is
  always ``tokenizer.decode(ids)``.
- `token_label(tokenizer, i)`: the text of id `i` on its own, for a drafted token in a tree; where its bytes
  are not whole characters, the stray bytes read as ``<0xE4>``, the notation byte-fallback vocabularies use.

No torch here: a tokenizer is anything with ``decode`` (and ``convert_ids_to_tokens`` for byte labels).
"""

from __future__ import annotations

from collections.abc import Sequence

PARTIAL = "\ufffd"  # what a decoder writes for bytes that are not (yet) a whole character


def _byte_alphabet() -> dict[str, int]:
    """The byte-level BPE alphabet: each byte 0..255 as the printable character that stands for it."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTE_OF = _byte_alphabet()


def bytes_label(data: bytes) -> str:
    """Bytes as text: whole UTF-8 characters as themselves, every stray byte as <0xNN>."""
    out, i = [], 0
    while i < len(data):
        for n in (1, 2, 3, 4):
            try:
                out.append(data[i : i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(f"<0x{data[i]:02X}>")
            i += 1
    return "".join(out)


def token_label(tokenizer, i: int) -> str:
    """The text of one id alone: its decode, or, where that holds a partial character, its bytes."""
    text = tokenizer.decode([i])
    if PARTIAL not in text:
        return text
    piece = tokenizer.convert_ids_to_tokens(i) if hasattr(tokenizer, "convert_ids_to_tokens") else None
    if isinstance(piece, str) and piece and all(c in BYTE_OF for c in piece):
        return bytes_label(bytes(BYTE_OF[c] for c in piece))
    return text


class Detokenizer:
    """Output ids -> one text piece per id. Reuses what it found for the ids it saw last, so a trace that grows
    by a round at a time costs two short decodes per new token, not a decode of the whole output per round.

    Each new piece is read off a window that starts at the previous piece's token: decoders that treat a
    sequence's first token apart (SentencePiece drops its leading space) treat both decodes alike."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._ids: list[int] = []  # ids seen so far
        self._pieces: list[str] = []  # the pieces of ids[: self._read]
        self._prefix = 0  # the window's first id
        self._read = 0  # ids before this have their text

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def pieces(self, ids: Sequence[int], checked: bool = True) -> list[str]:
        """One text piece per id of `ids` (the ids seen last, with more at the end, cost only the new ones). `checked`:
        the pieces' text is held against the whole decode of `ids` (one decode of the whole output), and a decoder the
        windows do not fit is read by whole prefixes instead; a live view may leave that to the finished run."""
        ids = [int(t) for t in ids]
        if ids[: len(self._ids)] != self._ids:
            self.__init__(self.tokenizer)
        for i in range(len(self._ids), len(ids)):
            self._push(ids, i)
        out = self._pieces + [""] * (len(ids) - len(self._pieces))
        if self._read < len(ids):  # ids held back at the end: their partial text goes to the last one
            window = ids[self._prefix :]
            out[-1] = self._decode(window)[len(self._decode(ids[self._prefix : self._read])) :]
        if checked and "".join(out) != self._decode(ids):  # a decoder the windows do not fit: by whole prefixes
            return by_prefixes(self.tokenizer, ids)
        return out

    def _push(self, ids: list[int], i: int) -> None:
        self._ids.append(ids[i])
        before = self._decode(ids[self._prefix : self._read])
        now = self._decode(ids[self._prefix : i + 1])
        if len(now) > len(before) and now.startswith(before) and not now.endswith(PARTIAL):
            self._pieces.extend([""] * (i - self._read) + [now[len(before) :]])
            self._prefix, self._read = self._read, i + 1


def by_prefixes(tokenizer, ids: Sequence[int]) -> list[str]:
    """The slow and sure way: each piece is what decoding the ids up to it adds to the text so far; a piece that
    would end in a partial character, or a decode that rewrites earlier text, waits for a later id."""
    out, shown = [], ""
    for i in range(len(ids)):
        text = tokenizer.decode(list(ids[: i + 1]))
        if text.startswith(shown) and (i + 1 == len(ids) or not text.endswith(PARTIAL)):
            out.append(text[len(shown) :])
            shown = text
        else:
            out.append("")
    full = tokenizer.decode(list(ids))
    if full != shown:  # the decoder rewrote earlier text at the end: the whole text goes to the first piece
        return [full] + [""] * (len(ids) - 1)
    return out
