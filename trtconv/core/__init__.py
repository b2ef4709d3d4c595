"""The bottom layer: errors and exit codes, late imports, progress, files written atomically,
signals, the precision names, model input/output types, typed results and each command's options.

Nothing here imports any other trtconv package.
"""
