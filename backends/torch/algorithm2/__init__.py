"""Algorithm 2's batched incremental search (:mod:`.search`): candidate keys, scoring and the
fused block, the straight-through estimator, the search trace and the structural logits."""
