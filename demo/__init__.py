"""The end-to-end demo: real compiled models, real incidents, the whole pipeline."""
