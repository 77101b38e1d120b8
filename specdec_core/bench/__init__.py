"""`python -m specdec_core bench`: every method on the same prompts, interleaved, on one machine in one run."""
