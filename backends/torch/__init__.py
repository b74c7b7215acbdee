"""The torch training backend, in rooms that import one way (docs/layout.md): :mod:`.runtime`
(devices, compilation, operations) < :mod:`.algorithm2` (the batched incremental search) <
:mod:`.models` (RRNN, RRNN-GRU, the gated baselines, frozen cells) < :mod:`.training` (the task
model, the Eq. 5 loss, TD targets, the epoch loop) < :mod:`.runs` (a whole run: trained,
evaluated, logged, loaded); the plugin object is :mod:`.plugin`."""
