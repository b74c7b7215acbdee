"""What one training epoch needs: the task model (:mod:`.task`), the Eq. 5 loss (:mod:`.loss`),
TD targets (:mod:`.td_targets`), batches, checkpoints, data parallelism, loggers, the epoch loop."""
