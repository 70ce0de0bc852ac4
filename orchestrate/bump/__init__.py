"""`orchestrate pins --bump`: move the coupled pins to upstream's newest coherent set, prove it, report it."""
