"""Results that other tools read (the llm-d benchmark report), and runs of other tools read into servelab tables."""
