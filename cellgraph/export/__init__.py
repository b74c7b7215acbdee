"""A cell out of the engine: JSON documents (:mod:`.jsonio`), sympy equations
(:mod:`.symbolic`) and graphviz drawings (:mod:`.draw`)."""
