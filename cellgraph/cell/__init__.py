"""The cell as data: typed expressions (leaves and nodes), cell graphs and their unfolded
trees, layouts of weight tuples and search spaces, the registry of operations and
activations, the constant leaves and the names of nodes (paper, Sec. 3)."""
