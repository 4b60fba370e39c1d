"""What the field taught us: failure signatures -> root cause -> fix; source builds known to hurt."""
