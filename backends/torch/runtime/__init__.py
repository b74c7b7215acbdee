"""Where torch code runs: devices and autocast (:mod:`.device`), ``torch.compile`` with its eager
fallback (:mod:`.compiled`), and the operations of the operation set (:mod:`.ops`)."""
