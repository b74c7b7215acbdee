"""The cell search's evaluator in torch: a fixed candidate cell trained from scratch on the
planted regression task, several restarts in one batched program (docs/discover.md)."""
