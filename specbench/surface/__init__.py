"""The speedup surface S(C, AL): forced-acceptance runs (derive), their table (table), predictions from it
(model_predict, the one prediction; predict, a run's prediction.csv) and its report (render). docs/surface.md
says what it measures; docs/metrics.md defines it."""
