"""An index of the n-grams of a growing token sequence: where did the context's last n tokens occur before?"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class NgramIndex:
    """The most recent position after every n-gram (n <= max_ngram) of a growing context.

    `extend` is incremental: each call indexes only the tokens added since the last one, O(max_ngram) each.
    An n-gram is indexed once a token follows it, so the context's own suffix is never its own match.
    """

    def __init__(self, max_ngram: int):
        self.max_ngram = max_ngram
        self.ctx: list[int] = []
        self.after: dict[tuple[int, ...], int] = {}  # n-gram -> index of the token that followed it, latest
        self.done = 0  # n-grams ending before ctx[done] are indexed

    def extend(self, tokens: Iterable[int]) -> None:
        self.ctx.extend(int(t) for t in tokens)
        ctx, end = self.ctx, len(self.ctx) - 1  # the last token has no follower yet
        for e in range(max(self.done, 1), end + 1):  # an n-gram ctx[e-n:e] is followed by ctx[e]
            for n in range(1, min(self.max_ngram, e) + 1):
                self.after[tuple(ctx[e - n : e])] = e
        self.done = max(self.done, end + 1)

    def sync(self, committed: Sequence[int]) -> None:
        """Make the index describe `committed`, which only ever grows during a generation (else rebuild)."""
        n = len(self.ctx)
        if len(committed) < n or (n and committed[n - 1] != self.ctx[-1]):
            self.__init__(self.max_ngram)
            n = 0
        self.extend(committed[n:])

    def propose(self, k: int, min_ngram: int = 1, after: Sequence[int] = ()) -> tuple[int, list[int]]:
        """(n, up to k tokens) after the longest matching n-gram, or (0, []) when none matches.

        When the match is closer to the end than k tokens, the copy continues periodically (a loop of
        period len(ctx) - start repeats), which is what copying token by token would produce.
        `after`: tokens that follow the indexed context without being indexed (a round's drafted ones); the
        context's suffix then reaches into them, and is still looked up among the indexed n-grams only.
        """
        ctx = self.ctx + list(after) if after else self.ctx
        n, start = self.match(ctx, min_ngram)
        if not n:
            return 0, []
        period = len(ctx) - start
        return n, [ctx[start + (i % period)] for i in range(k)]

    def match(self, suffix: Sequence[int], min_ngram: int = 1) -> tuple[int, int]:
        """(n, start): the longest indexed n-gram that ends `suffix` (n >= min_ngram) and the position in `ctx` of the
        token that followed its most recent occurrence; (0, -1) when none matches."""
        for n in range(min(self.max_ngram, len(suffix)), min_ngram - 1, -1):
            start = self.after.get(tuple(suffix[-n:]))
            if start is not None:
                return n, start
        return 0, -1
