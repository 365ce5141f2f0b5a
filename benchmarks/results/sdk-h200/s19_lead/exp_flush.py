"""Scratch (session 19): bench_sdk_study.py with SdkConfig's default flush_interval_s replaced by $FLUSH_S, so the
background thread does not drain while a block's requests run (the block's flush then builds every record)."""
import os, runpy, sys
from inferensics.collector.host.config import SdkConfig
d = list(SdkConfig.__init__.__defaults__)
d[2] = float(os.environ["FLUSH_S"])
SdkConfig.__init__.__defaults__ = tuple(d)
assert SdkConfig().flush_interval_s == float(os.environ["FLUSH_S"])
sys.argv = ["bench_sdk_study.py", *sys.argv[1:]]
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tree/benchmarks/bench_sdk_study.py"), run_name="__main__")
