"""What the page does to the loaded pair besides decoding, in local mode: train its SpecDec++ head (the quick preset,
with a progress bar, an estimate and Stop) and measure its hardware curves on this machine (the Hardware tab). A
public page does neither, and says so. Handlers take the page's model settings by name, as `handlers` do."""

from __future__ import annotations

import threading

import gradio as gr

from specviz.app import pairjobs, policy
from specviz.app.inputs import ERRORS
from specviz.train.config import QUICK
from specviz.train.head import Stopped
from specviz.viz.budget import budget_figure, budget_note

_stop = threading.Event()  # Stop training: read between batches of the head's data and between epochs
PUBLIC_NOTE = "A public page never trains a head or measures its machine: run specviz locally for your own pair."


def head_note(card: dict | None) -> str:
    """The Model pair panel's line on SpecDec++'s head: its card, or that there is none and what training costs."""
    if policy.public():
        return PUBLIC_NOTE
    if card is None:
        return (
            "**SpecDec++ head**: loaded with the pair. For a pair without one, *Train a head* runs the quick preset "
            f"({QUICK.prompts} Spec-Bench prompts x {QUICK.new_tokens} tokens, {QUICK.epochs} epochs) here."
        )
    if not card:
        return "**SpecDec++ head**: none for this pair yet: *Train a head* (the quick preset) and SpecDec++ runs."
    auc = (card.get("heldout") or {}).get("auc")
    rows, took = card.get("rows") or card.get("train_rows"), card.get("total_s")
    parts = [f"held-out AUC {auc:.3f}" if isinstance(auc, float) else "", f"{rows:,} draft tokens seen" if rows else ""]
    parts.append(f"trained in {took:.0f} s" if took else "")
    when = f" on {card['trained']}" if card.get("trained") else ""
    return f"**SpecDec++ head**: {', '.join(p for p in parts if p)}{when}."


BATCH_STEP_COST = 4  # a step over QUICK.gen_batch rows, in one-row steps, on a CPU (assets/bench/README.md)
TRAINING_S = 10  # the quick preset's epochs after its answers


def estimate_s(pair_ms: float) -> float:
    """Seconds the quick preset takes on a pair whose one-token target step plus draft step take `pair_ms` here
    (`pairjobs.step_ms`): the answers run in batches of QUICK.gen_batch rows, each batched step costing
    BATCH_STEP_COST one-row steps, then TRAINING_S of training. The progress bar's own estimate takes over once the
    answers start."""
    steps = QUICK.prompts * QUICK.new_tokens / QUICK.gen_batch
    return steps * pair_ms * BATCH_STEP_COST / 1e3 + TRAINING_S


def train_head(
    pair: str, dtype: str, target: str, draft: str, device_map: str, max_memory: str, progress=gr.Progress()
) -> str:
    """Train a SpecDec++ acceptance head for the pair (the quick preset) and write it where SpecDec++ finds it; the
    head's card."""
    try:
        cfg = policy.model_config(pair, dtype, target, draft, device_map, max_memory)
        progress(0.0, desc="loading the pair")
        card = pairjobs.train_head(cfg, lambda f, what: progress(f, desc=what), _stop)
    except (*ERRORS, Stopped) as e:  # a stop, a bad setting, a missing model: a sentence on the page
        raise gr.Error(str(e)) from None
    return head_note(card)


def stop_training() -> str:
    """Ask a running head training to stop (it stops after its current batch)."""
    _stop.set()
    return "Stopping after the current batch …"


def estimate(pair: str, dtype: str, target: str, draft: str, device_map: str, max_memory: str) -> str:
    """The head line for the pair as loaded: its card, or the quick preset's estimated time here."""
    try:
        cfg = policy.model_config(pair, dtype, target, draft, device_map, max_memory)
    except ValueError:  # the run itself said what is wrong with the settings
        return head_note(None)
    card = pairjobs.head_card_of(cfg)
    note = head_note(card)
    ms = pairjobs.step_ms(cfg) if card == {} else 0.0  # timed only where a head is wanted
    if ms:
        note += f" Estimated here: about {estimate_s(ms) / 60:.0f} min (from this pair's own forwards)."
    return note


def measure_hardware(
    pair: str, dtype: str, target: str, draft: str, device_map: str, max_memory: str, progress=gr.Progress()
) -> tuple:
    """Measure the loaded pair's verify and draft curves and its acceptance by position on this machine, and pick
    the tree budget they make best; (the figure, a sentence)."""
    try:
        cfg = policy.model_config(pair, dtype, target, draft, device_map, max_memory)
        progress(0.0, desc="loading the pair")
        record = pairjobs.measure_hardware(cfg, lambda f, what: progress(f, desc=what))
    except ERRORS as e:
        raise gr.Error(str(e)) from None
    return budget_figure({record["dtype"]: record}, record["dtype"]), budget_note(record, here=True)
