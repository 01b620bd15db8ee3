"""The router layer: the endpoint picker and its tokenizer."""
