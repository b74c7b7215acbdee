"""Checks of the paper's theorems by construction (paper Sec. 4 and Appendices)."""
