"""The fabric sweep's analysis: who is slow, retested before blamed."""
