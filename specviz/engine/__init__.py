"""The round loop (`loop.iter_rounds`) and the record of a run (`record.generate`, `record.collect`)."""

from specviz.engine.loop import iter_rounds
from specviz.engine.record import collect, generate

__all__ = ["collect", "generate", "iter_rounds"]
