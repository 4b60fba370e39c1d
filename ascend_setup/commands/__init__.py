"""One module per command; each turns parsed arguments into one call and renders its result."""
