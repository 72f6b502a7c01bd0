"""perfguard's ReFrame test library: shared logic in common/, one folder per benchmark."""
