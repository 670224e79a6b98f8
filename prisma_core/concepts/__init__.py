"""The concept levels a trained run is read in: features' statistics (`analysis`) and evidence passages (`evidence`),
themes, sub-themes (`subthemes`) and feature families."""
