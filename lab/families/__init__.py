"""One module per kernel family: how to launch its rungs, its reference and its ceiling."""
