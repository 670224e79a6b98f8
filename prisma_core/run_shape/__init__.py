"""The shape of a stored run as read: `LoadedRun` and `Edited` (`loaded_run`), and its recorded settings read into
the stage configs (`run_settings`). Below both the analyst's edits (`curation`) and the read model (`reading`), which
name it."""
