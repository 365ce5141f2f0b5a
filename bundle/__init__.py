"""Release bundles: build, sign, verify, load and diff the identity of what a host executes."""
