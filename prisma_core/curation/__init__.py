"""The analyst's curation of a run: the edit records (`edits`), applied to the read model (`applied_edits`; a theme
split into its sub-themes: `theme_split`), and the settings of the `edit` and `carry` commands (`edit_config`)."""
