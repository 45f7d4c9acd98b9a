"""eval.yaml: models, loading, templating, dataset and run settings."""
