"""The float64 numpy reference backend: Algorithm 2 written literally (:mod:`.search`), cell
evaluation (:mod:`.eval`) and the plugin object (:mod:`.plugin`)."""
