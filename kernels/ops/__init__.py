"""The semantic ops: each module defines one family's references, shape buckets and providers."""
