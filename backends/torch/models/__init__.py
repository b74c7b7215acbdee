"""The recurrent models: RRNN (:mod:`.rrnn`), RRNN-GRU (:mod:`.rrnn_gru`), the GRU/LSTM
baselines (:mod:`.gated`), frozen cells (:mod:`.freeze`) and the teacher warm start."""
