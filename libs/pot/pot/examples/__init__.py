"""Reference training jobs that use the proof-of-training recorder."""
