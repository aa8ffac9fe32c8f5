"""`specviz train`: train a draft (draft), a feature drafter (eagle) or a SpecDec++ head (head; --quick for a small
pair in minutes). Also `python -m specviz.train <command> [options]`; each command is a module with `main(argv)`."""

import sys
from importlib import import_module

COMMANDS = {"head": "specviz.train.head", "draft": "specviz.train.draft_run", "eagle": "specviz.train.eagle"}


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        raise SystemExit(f"usage: specviz train {{{','.join(COMMANDS)}}} [options]")
    try:
        import_module(COMMANDS[argv[0]]).main(argv[1:])
    except (ValueError, FileNotFoundError, TimeoutError) as e:  # bad options, missing weights: a sentence
        raise SystemExit(f"specviz.train {argv[0]}: error: {e}") from None


if __name__ == "__main__":
    main()
