"""Where a model fails: the validation rows it gets wrong (`wrong_rows`, errors.csv), training rows whose label looks
wrong (`label_issues`, ranked with cleanlab), and `tuneloop inspect` (`inspect`)."""
