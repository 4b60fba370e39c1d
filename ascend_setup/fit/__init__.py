"""Will a model run on a card, and how fast: model reading, the estimate, and the HBM probe."""
