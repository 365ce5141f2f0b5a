"""Our Triton kernels, one module per op family; each wrapped as a ``torch.library.triton_op`` so Inductor
traces through it and can fuse around it. Imported only where Triton is installed."""
