"""Scratch (session 19): bench_sdk_study.py with SdkConfig's default flush_interval_s replaced by $FLUSH_S, so the
background thread does not drain while a block's requests run (the block's flush then builds every record).

Run from gpu/<name>/ beside tree/ (see exp.sh); not part of the product."""

import os
import runpy
import sys

from inferensics.collector.host.config import SdkConfig

defaults = list(SdkConfig.__init__.__defaults__ or ())
defaults[2] = float(os.environ["FLUSH_S"])  # flush_interval_s, the third field
SdkConfig.__init__.__defaults__ = tuple(defaults)
assert SdkConfig().flush_interval_s == float(os.environ["FLUSH_S"])
sys.argv = ["bench_sdk_study.py", *sys.argv[1:]]
study = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tree/benchmarks/bench_sdk_study.py")
runpy.run_path(study, run_name="__main__")
