"""HF transformers: static batching with `generate`, offline only."""
