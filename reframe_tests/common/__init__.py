"""Logic every perfguard check shares: launch options, binding proof, references."""
