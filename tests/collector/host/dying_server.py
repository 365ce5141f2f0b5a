"""A serving process that dies inside a request, and the next one that starts on the host (run as a script).

``python dying_server.py SERVICE_URL JOURNAL MODE`` (the token in ``$INFERENSICS_TOKEN``), exporting over
OTLP to a real collector service as a production host does; with a ``chdb://`` DSN in place of the URL, into
that embedded store, chDB loaded in the serving process (``instrument(store=...)``, single-process mode):

- ``kernel``: serves two requests of a compiled embedding, then one whose token id is out of range. The
  kernel Inductor generated for CPU checks its index inside an OpenMP region and calls ``std::terminate``:
  the process aborts inside the request.
- ``killed``: two requests served, one left in flight on a second thread, then SIGKILL inside a request on
  the main thread (what the out-of-memory killer does).
- ``unexported``: two requests served and flushed, then five served and not exported yet (over OTLP: still in the
  SDK's queue, its background thread draining only in an hour; into a store: handed to the store exporter, which
  buffers them for a batch insert), then SIGKILL inside a request.
- ``forked``: a request served, then ``fork``: the child enters a request and lives on (its pid printed),
  while the parent dies by SIGKILL inside a request of its own.
- ``recover``: starts a tracker with the same service and journal folder (as a restarted server does),
  flushes, shuts down and prints its stats, what is left in the journal folder and its pid as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import torch

from inferensics.collector.host import SdkConfig, instrument
from inferensics.schema.store import Store


def main(destination: str, journal: str, mode: str) -> None:
    store = Store.open(destination) if destination.startswith("chdb://") else None
    drain_s = 3600.0 if mode == "unexported" and store is None else 0.25
    config = SdkConfig(journal_dir=journal, fingerprint_rate=1.0, flush_interval_s=drain_s)
    service_url = None if store is not None else destination
    if mode == "recover":
        tracker = instrument(service_url, store, host="restarted", model="other", config=config)
        tracker.flush()
        tracker.shutdown()
        print(json.dumps({"stats": tracker.stats(), "left": sorted(os.listdir(journal)), "pid": os.getpid()}))
        return
    tracker = instrument(
        service_url, store, host="h1", hw_pool="cpu-a", model="emb", traffic_class="interactive", config=config
    )
    if mode == "kernel":
        table = tracker.compile(torch.nn.Embedding(1000, 256))
        with torch.inference_mode():
            for i in range(2):
                with tracker.request(f"ok-{i}", traffic_class="interactive", tenant="t1", shape=(8, 256)) as req:
                    req.set_output(table(torch.randint(0, 1000, (8, 256))))
            tracker.flush()
            tokens = torch.randint(0, 1000, (8, 256))
            tokens[3, 7] = 5000
            with tracker.request("bad-1", traffic_class="interactive", tenant="t1", shape=(8, 256)) as req:
                req.set_output(table(tokens))
    elif mode == "killed":
        for i in range(2):
            with tracker.request(f"ok-{i}", shape=(1, 4)):
                pass
        tracker.flush()
        started = threading.Event()

        def other() -> None:
            with tracker.request("side-1", traffic_class="batch", shape=(2, 16)):
                started.set()
                threading.Event().wait(60)

        threading.Thread(target=other, daemon=True).start()
        started.wait(10)
        with tracker.request("big-1", traffic_class="interactive", shape=[64, 8192]):
            os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "unexported":
        for i in range(2):
            with tracker.request(f"ok-{i}", shape=(1, 4)):
                pass
        tracker.flush()  # delivered
        for i in range(5):
            with tracker.request(f"lost-{i}", shape=(1, 4)):
                pass
        deadline = time.monotonic() + 60
        while store is not None and tracker.stats()["requests"] < 7 and time.monotonic() < deadline:
            time.sleep(0.01)  # until the background thread has handed them to the store exporter's buffer
        with tracker.request("big-1", shape=(1, 4)):
            os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "forked":
        with tracker.request("parent-0"):
            pass
        child = os.fork()
        if child == 0:
            quiet = os.open(os.devnull, os.O_RDWR)  # let go of the parent's pipes: its runner waits on them
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            with tracker.request("child-1"):
                time.sleep(120)
            os._exit(0)
        print(json.dumps({"child": child}), flush=True)
        time.sleep(0.5)  # the child is in its request
        with tracker.request("parent-1"):
            os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(f"{mode}: the process should have died in the request")


if __name__ == "__main__":
    main(*sys.argv[1:4])
