"""The problems as a Hugging Face dataset: the Parquet build, loading, pushing and rows ->
modules (`hub`), and the dataset card with its YAML configs (`card`)."""
