"""Using a trained model: `Classifier` (one object and one inference path for every use), evaluating and predicting
files through it (`evaluate`), prediction rows and files (`rows`)."""
