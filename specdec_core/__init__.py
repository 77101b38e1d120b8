"""specdec_core: exact speculative decoding on PyTorch + transformers. See README.md for what each file owns."""
