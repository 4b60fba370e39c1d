"""The front door: the parser, the options several commands share, rendering and progress."""
