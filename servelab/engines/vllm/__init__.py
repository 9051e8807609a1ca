"""vLLM: its command lines, its engine face, its own client (in-process, forked, cached prompts), its offline runner, the P/D proxy and the fused-size fix servelab adds around it."""
