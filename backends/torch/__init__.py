"""The torch training backend: operations, the batched incremental search, RRNN, RRNN-GRU and
the baselines, frozen cells, the Eq. 5 loss, TD targets, the trainer and the plugin object
(:mod:`.backend`)."""
