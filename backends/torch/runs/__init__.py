"""A whole run: trained (:mod:`.train`), evaluated (:mod:`.evaluation`), its structures logged
(:mod:`.structure_log`), its progress printed (:mod:`.messages`) and loaded back (:mod:`.run`)."""
