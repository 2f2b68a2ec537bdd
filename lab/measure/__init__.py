"""Checking against float64, timing, and the records every figure comes from."""
