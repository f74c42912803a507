"""Data: generators, tokenizer, tokenized corpora, Hub loaders and DataModules."""
