"""Offline bundles: every file an install of one target needs (the lock's packages, the source build's
inputs, the tool itself), carried across an air gap and installed with no index at all."""
