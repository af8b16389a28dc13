"""Pure numerical kernels (numpy/scipy only): no dask, no hydra, no I/O."""
