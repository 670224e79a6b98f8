"""Feature labels: keywords without an LLM, Ollama labels, and label-quality scores."""
