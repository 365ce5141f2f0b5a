"""Nothing a serving process hands the SDK makes it raise or lose a request's record: outputs that are
not readable tensors, exceptions that cannot be printed, ids and shapes of the wrong type, inputs that
cannot be captured, nested scopes, scopes misused, and requests from several threads at once."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from inferensics.collector.host import CaptureRules, SdkConfig, Tracker, instrument
from inferensics.schema import RequestEvent
from inferensics.schema.store import Store


def _affine(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) * 2 - 1


def _by_id(store: Store) -> dict[str, RequestEvent]:
    return {r.request_id: r for r in store.select_events(RequestEvent)}


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is user code")


OUTPUTS: dict[str, Any] = {
    "none": None,
    "text": "not a tensor",
    "tuple": (torch.ones(2), torch.ones(3)),
    "dict": {"logits": torch.ones(2)},
    "ints": torch.arange(6).reshape(2, 3),
    "empty": torch.ones(0, 5),
    "meta": torch.ones(2, 3, device="meta"),  # launches, but can never be read back
    "sparse": torch.eye(3).to_sparse(),
}


def test_odd_outputs_and_exceptions_keep_every_record(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_affine)
    with tracker.request("warm") as req:
        req.set_output(compiled(torch.ones(4)))
    for name, output in OUTPUTS.items():
        with tracker.request(f"out-{name}") as req:
            compiled(torch.ones(4))
            req.set_output(output)

    def serve_then_fail(x: torch.Tensor) -> None:
        compiled(x)
        raise _UnprintableError

    with pytest.raises(_UnprintableError), tracker.request("exc-unprintable"):
        serve_then_fail(torch.ones(4))
    with pytest.raises(KeyError), tracker.request("exc-key"):
        raise KeyError("k")
    tracker.shutdown()

    r = _by_id(store)
    assert sorted(r) == sorted(["warm", "exc-unprintable", "exc-key", *(f"out-{n}" for n in OUTPUTS)])
    for name in OUTPUTS:
        rec = r[f"out-{name}"]
        assert (rec.outcome, rec.guard_outcome, rec.status, rec.graph_calls) == ("hit", "hit", "ok", (1,)), name
    assert r["out-ints"].fp_argmax_head == (2, 2)
    assert r["out-meta"].fp_argmax_digest == ""
    assert r["exc-unprintable"].status == "error"
    assert r["exc-unprintable"].outcome == "error"
    assert r["exc-unprintable"].error == "_UnprintableError: <unprintable>"
    assert r["exc-key"].error == "KeyError: 'k'"
    assert tracker.stats()["fingerprint_errors"] == 2  # the sparse output (at once), the meta one (later)
    assert tracker.stats().get("process_errors", 0) == 0


def test_wrong_types_and_uncapturable_inputs_keep_every_record(store: Store) -> None:
    def redact(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if "secret" in inputs:
            raise RuntimeError("redaction hook failed")
        return inputs

    rules = CaptureRules(enabled=True, rate=1.0, redact=redact)
    tracker = instrument(store=store, host="h", model="m", config=SdkConfig(capture=rules))
    with tracker.request("good-0", inputs={"x": torch.ones(3)}):
        pass
    with tracker.request(123, tenant=None, traffic_class=7, shape=("a", 2)):  # type: ignore[arg-type]
        pass
    with tracker.request("shape-int", shape=5):  # type: ignore[arg-type]
        pass
    with tracker.request("shape-text", shape="abc"):  # a string must be a signature such as "2x128"
        pass
    with tracker.request("shape-float", shape=(2.5, 3)):  # type: ignore[arg-type]  # it was stored as 2x3
        pass
    with tracker.request("shape-signature", shape="2x128"):
        pass
    with tracker.request("inputs-list", inputs={"x": [1, 2]}):  # type: ignore[dict-item]
        pass
    with tracker.request("inputs-redact-fails", inputs={"secret": torch.ones(3)}):
        pass
    with tracker.request("good-1"):
        pass
    tracker.shutdown()

    r = _by_id(store)
    assert sorted(r) == [
        "123", "good-0", "good-1", "inputs-list", "inputs-redact-fails",
        "shape-float", "shape-int", "shape-signature", "shape-text",
    ]  # fmt: skip
    assert (r["123"].tenant, r["123"].traffic_class, r["123"].shape) == ("", "7", "")
    assert r["shape-int"].shape == r["shape-text"].shape == r["shape-float"].shape == ""
    assert r["shape-signature"].shape == "2x128"
    assert r["good-0"].capture_blob != ""
    assert r["inputs-list"].input_digest == r["inputs-list"].capture_blob == ""
    assert r["inputs-redact-fails"].input_digest != ""
    assert r["inputs-redact-fails"].capture_blob == ""
    stats = tracker.stats()
    assert (stats["shape_errors"], stats["capture_errors"], stats["export_errors"]) == (4, 2, 0)


def test_nested_and_misused_scopes(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_affine)
    with tracker.request("outer") as outer:
        compiled(torch.ones(4))
        with tracker.request("inner") as inner:
            inner.set_output(compiled(torch.ones(4)))
        outer.set_output(compiled(torch.ones(4)))
    twice = tracker.request("twice")
    twice.__enter__()
    twice.__exit__(None, None, None)
    twice.__exit__(None, None, None)
    tracker.request("never-entered").__exit__(None, None, None)
    elsewhere = tracker.request("exited-elsewhere")
    for step in (elsewhere.__enter__, lambda: elsewhere.__exit__(None, None, None)):
        thread = threading.Thread(target=step)  # entered in one thread, exited in another
        thread.start()
        thread.join()
    tracker.shutdown()

    r = _by_id(store)
    assert sorted(r) == ["exited-elsewhere", "inner", "outer", "twice"]
    assert (r["outer"].outcome, r["outer"].graph_calls) == ("compile", (2,))
    assert (r["inner"].outcome, r["inner"].graph_calls) == ("hit", (1,))
    assert tracker.stats()["scope_errors"] == 3


def test_requests_from_several_threads(tracker: Tracker, store: Store) -> None:
    compiled = tracker.compile(_affine)
    with tracker.request("warm") as req:
        req.set_output(compiled(torch.ones(4)))
    start = threading.Barrier(4)
    failures: list[BaseException] = []

    def serve(worker: int) -> None:
        try:
            start.wait()
            for i in range(25):
                with tracker.request(f"t{worker}-{i}") as req:
                    for _ in range(1 + i % 3):
                        out = compiled(torch.ones(4))
                    req.set_output(out)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=serve, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tracker.shutdown()

    assert failures == []
    r = _by_id(store)
    assert len(r) == 101
    for w in range(4):
        for i in range(25):
            rec = r[f"t{w}-{i}"]
            assert (rec.outcome, rec.guard_outcome, rec.graph_calls) == ("hit", "hit", (1 + i % 3,))
            assert rec.graph_keys == r["warm"].graph_keys
    assert tracker.stats()["dropped"] == 0


def test_stats_always_has_every_documented_counter(store: Store) -> None:
    """``stats()['fingerprint_unsampled']`` (the README's example) raised KeyError until the first skip; the
    export counters were missing with ``store=``."""
    tracker = instrument(store=store, host="h", model="m", config=SdkConfig(fingerprint_rate=1.0))
    try:
        with tracker.request("r") as req:
            req.set_output(torch.ones(2, 3))
        tracker.flush()
        stats = tracker.stats()
    finally:
        tracker.shutdown()
    for key in ("fingerprint_unsampled", "requests_recovered", "export_refused_auth", "export_refused_down",
                "export_refused_back_pressure", "dropped", "shape_errors", "captures", "bundle_miss_graphs",
                "bundle_hit_graphs", "kernel_evidence_applied", "kernel_evidence_refused"):  # fmt: skip
        assert stats[key] == 0, key
    assert stats["requests"] == 1
