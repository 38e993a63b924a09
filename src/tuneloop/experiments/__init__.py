"""Many runs of one configuration: seeds and folds with their summary (`runs`), out-of-fold predictions (`folds`),
Optuna search (`search`), and what they share (`common`: resume, keep the best)."""
