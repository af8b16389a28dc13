"""Grid expansion, task identity, batching and Dask execution (no science here)."""
