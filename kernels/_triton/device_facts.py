"""What the launch code asks of a GPU: its multiprocessor count and compute capability, read once per device."""

from __future__ import annotations

import functools

import torch

H100_SMS = 132
"""Multiprocessors of an H100 or H200: what :func:`sm_count` assumes off a GPU unless told otherwise."""


@functools.cache
def device_facts(index: int) -> tuple[int, tuple[int, int]]:
    """``(multiprocessors, (major, minor))`` of CUDA device ``index``."""
    props = torch.cuda.get_device_properties(index)
    return int(props.multi_processor_count), (int(props.major), int(props.minor))


def cuda_index(device: torch.device) -> int:
    """The CUDA device index of ``device`` (the current device when it names none)."""
    return device.index if device.index is not None else torch.cuda.current_device()


def sm_count(device: torch.device, off_gpu: int = H100_SMS) -> int:
    """Multiprocessors of ``device``; ``off_gpu`` for a device that is not a GPU (Triton's interpreter)."""
    if device.type != "cuda":
        return off_gpu
    return device_facts(cuda_index(device))[0]
