"""``recstack correlate``: which architecture features go with which bottleneck metrics, across models.

:mod:`.points` turns profiles or a results store into points (one per model, batch size, backend and
mode) of architecture features and bottleneck metrics; :mod:`.stats` computes Spearman rank correlations
with bootstrap intervals resampled over models and a ridge regression with a leave-one-model-out fit;
:mod:`.render` draws the offline HTML report and the scatter plots. Method and limits: docs/correlate.md.
"""
