"""`specviz loadtest`'s measurements run against the shared test server (small sizes; the figures come from the
command itself, docs/deploy.md)."""

import pytest
from app_server import app_url

pytest.importorskip("gradio_client")
from specviz.app import files  # noqa: E402
from specviz.tools import loadtest  # noqa: E402


def test_concurrent_clients_are_all_served_alike():
    r = loadtest.concurrent(app_url(), clients=3, requests=1)
    assert r["served"] == 3 and r["distinct_outputs"] == 1


def test_stop_frees_the_model_in_the_decode_and_in_the_baseline():
    for compare in (False, True):
        r = loadtest.cancel(app_url(), compare=compare)
        assert r["next_status"].startswith("Done: 2 tokens"), r


def test_memory_record_over_requests_and_uploads():
    r = loadtest.memory(app_url(), 4, next(iter(files.recorded().values())))
    assert r["requests"] == 4 and r["uploads"] == 1 and r["rss_mb_after"] > 0
