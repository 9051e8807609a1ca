"""Load and accuracy clients that are not an engine's own (AIPerf, lm-eval) and the time bound shared by the engines' own clients."""
