"""Which requests' outputs are fingerprinted: a rate per kind of output, chosen by request id.

The rule is deterministic on the request id alone (the same on every host, bundle and process), so a
canary's two sides and a replay fingerprint the same requests, and every record says under which rate it
was made (``fp_rate``) and whether it was chosen (``fp_status``): a comparison never mixes a fingerprint
with a request that has none. The choice runs on the serving thread only when the rate is below 1 (the
CPU default); device outputs are all fingerprinted by default and pay one comparison for the rule.

The hash is CRC-32 of the request id's UTF-8 bytes, mixed by a multiplication (Fibonacci hashing) so that
ids that differ in their last characters spread over the whole range; a request is chosen when the mixed
value is below ``rate * 2**32``. It costs about 0.2 µs (a BLAKE2b about 1.5 µs); the profiler's sampling
(``SdkConfig.sample_rate``) chooses by the same hash, so the requests chosen at the smaller of two rates are
among those chosen at the larger (a profiled sample holds the fingerprinted requests). Its job is an even,
reproducible choice, not secrecy.
"""

from __future__ import annotations

import zlib
from typing import Final

from inferensics.collector.host.config import CPU_FINGERPRINT_RATE, DEVICE_FINGERPRINT_RATE, SdkConfig
from inferensics.collector.host.trusted_records import f32

HASH_MIX: Final = 0x9E3779B1
"""2**32 divided by the golden ratio, odd: multiplying by it modulo 2**32 is a bijection that carries
every input bit into the high bits the threshold compares."""
HASH_MASK: Final = 0xFFFFFFFF


def request_hash(request_id: str) -> int:
    """The 32-bit value the rule compares for ``request_id`` (the same on every host and process).

    >>> request_hash("req-1") == request_hash("req-1")
    True
    """
    return (zlib.crc32(request_id.encode()) * HASH_MIX) & HASH_MASK


class FingerprintRule:
    """Fingerprint the requests whose :func:`request_hash` is below ``rate * 2**32``.

    Attributes:
        rate: The fraction of request ids chosen (1: every request; 0: none).
        recorded: ``rate`` as the ``fp_rate`` column stores it (float32), rounded once here.
        every: Whether every request is chosen (the rule then hashes nothing).
        threshold: A request is chosen when its :func:`request_hash` is below this.
    """

    __slots__ = ("every", "rate", "recorded", "threshold")

    def __init__(self, rate: float) -> None:
        self.rate = float(rate)
        self.recorded = f32(self.rate)
        self.every = self.rate >= 1.0
        self.threshold = int(min(max(self.rate, 0.0), 1.0) * 2**32)

    def chosen(self, request_id: str) -> bool:
        """Whether ``request_id``'s output is fingerprinted.

        >>> FingerprintRule(1.0).chosen("a"), FingerprintRule(0.0).chosen("a")
        (True, False)
        """
        return self.every or request_hash(request_id) < self.threshold


def fingerprint_rules(config: SdkConfig) -> tuple[FingerprintRule, FingerprintRule]:
    """``(rule for CPU outputs, rule for device outputs)`` under ``config``."""
    if config.fingerprint_rate is not None:
        rule = FingerprintRule(config.fingerprint_rate)
        return rule, rule
    return FingerprintRule(CPU_FINGERPRINT_RATE), FingerprintRule(DEVICE_FINGERPRINT_RATE)
