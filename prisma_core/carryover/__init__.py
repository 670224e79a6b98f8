"""The analyst's edits across runs: carried to a new training of the same dataset (`carry`), and the edits a run does
not show, with where each fits best (`edit_notices`). Above the read model (`reading`), whose runs they load."""
