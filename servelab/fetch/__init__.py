"""What is fetched or built before any server starts: the tiny local Llama, models by shape
(dummy weights), workload datasets, local lm-eval tasks, and facts read from a checkpoint."""
MAY_IMPORT = ("config",)
