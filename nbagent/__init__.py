"""nbagent."""
