"""Data, from files to batches; one module a step, each importing only the ones before it:

readers (formats, rows, columns) -> sources (GLUE folder, Hub, user files -> canonical Arrow tables) -> labels
(problem type, label names, targets) -> tokenize (cached `datasets.map`) -> batching (samplers, padding, loaders)
-> prepare (the whole step for a run). Import from the module that does the step, e.g.
`from tuneloop.data.labels import LabelSchema`.
"""
