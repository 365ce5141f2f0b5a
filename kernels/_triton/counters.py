"""Zeroed int32 counters for the split kernel's last-split merge, kept between calls.

Each (sequence, KV head) group of a split launch counts its finished splits on one counter, and the split that
counts last merges the group and puts the counter back to zero. So counters handed back to a stream are zero
again for the next launch on that stream, and a call needs a memset only for counters never used before.
Allocating them per call (``torch.zeros``) put a memset launch before every split kernel: a node of its own in a
CUDA graph (``benchmarks/probe_paged_parts.py`` measures it).

Counters come from zeroed chunks, made outside CUDA-graph capture, in slices that are never shared between
launches that may run at the same time:

- an eager call takes its stream's slice (launches on one stream run one after another), grown when a call
  needs more counters than the slice holds (the old one is left unused: a launch still queued on the stream
  may hold it);
- a call under CUDA-graph capture takes a fresh slice that is its own for good: the graph replays that launch on
  whatever stream, at whatever time, so no other launch may ever count on it. No chunk is made under capture
  (that would record a memset in the graph); when no chunk has room, the call allocates its own (a memset
  recorded in the graph, as before) and :attr:`CounterPool.stats` counts it.
"""

from __future__ import annotations

import threading
from typing import Final

import torch

from inferensics.kernels._triton.device_facts import cuda_index

CHUNK: Final = 1 << 18
"""Counters per zeroed chunk (1 MiB of int32)."""
STREAM_SLICE: Final = 1024
"""Fewest counters a stream's slice holds (batch × KV heads of most decode calls, so a stream takes one)."""


class CounterPool:
    """Zeroed counters per device: per stream for eager calls, per captured launch under CUDA-graph capture.

    Attributes:
        stats: ``chunks`` made, ``stream_slices`` and ``captured_slices`` handed out, ``captured_memsets``
            (calls under capture that found no room and allocated their own).
    """

    def __init__(self, chunk: int = CHUNK) -> None:
        self._chunk = chunk
        self._lock = threading.Lock()
        self._free: dict[torch.device, tuple[torch.Tensor, int]] = {}  # current chunk and its next free offset
        self._streams: dict[tuple[torch.device, int], torch.Tensor] = {}
        self.stats = {"chunks": 0, "stream_slices": 0, "captured_slices": 0, "captured_memsets": 0}

    def take(self, device: torch.device, n: int) -> torch.Tensor:
        """``n`` zeroed int32 counters on ``device`` for a launch on its current stream, left zeroed by it."""
        if device.type == "cuda":
            device = torch.device("cuda", cuda_index(device))  # "cuda" and "cuda:0" are one key
        capturing = device.type == "cuda" and torch.cuda.is_current_stream_capturing()
        with self._lock:
            if capturing:
                counters = self._carve(device, n, grow=False)
                if counters is None:
                    self.stats["captured_memsets"] += 1
                    return torch.zeros(n, dtype=torch.int32, device=device)
                self.stats["captured_slices"] += 1
                return counters
            key = (device, torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0)
            mine = self._streams.get(key)
            if mine is None or mine.numel() < n:
                mine = self._carve(device, max(n, STREAM_SLICE), grow=True)
                assert mine is not None  # grow=True always finds room
                self._streams[key] = mine
                self.stats["stream_slices"] += 1
            return mine[:n]

    def _carve(self, device: torch.device, n: int, *, grow: bool) -> torch.Tensor | None:
        chunk, used = self._free.get(device, (None, 0))
        if chunk is None or used + n > chunk.numel():
            if not grow:
                return None
            chunk, used = torch.zeros(max(self._chunk, n), dtype=torch.int32, device=device), 0
            self.stats["chunks"] += 1
        self._free[device] = (chunk, used + n)
        return chunk[used : used + n]


COUNTERS = CounterPool()
"""The process's counters for :mod:`paged_attention`'s last-split merge."""
