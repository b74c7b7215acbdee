"""The tasks and their data: loaders of enwik8, PTB and SST (:mod:`.text`), GloVe vectors,
the generated planted task, where data folders are found and how they are fetched."""
