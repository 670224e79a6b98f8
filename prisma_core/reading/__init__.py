"""The read model: a run read back with the analyst's edits applied (`runs`), explored (`explore`), summed up
(`overview`), its features offered to a view (`feature_queries`), named and judged in words (`run_quality`)."""
