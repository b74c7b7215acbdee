"""Running experiments: the training configuration and presets, run folders and their logs,
summaries and plots of finished runs, the hyper-parameter search (:mod:`.hpo`) and the
Table 1 protocol (:mod:`.reproduce`, run by :mod:`.jobs`)."""
