"""Traces in: what an instrumented RAG app already records, read as raglab's own outputs.

- :mod:`raglab.traces.otlp`: OTLP JSON (the OpenTelemetry Collector's file exporter: one
  ``ExportTraceServiceRequest`` a line, or one JSON document), streamed, spans grouped by
  trace id; memory bounded by the traces still open, not by the file.
- :mod:`raglab.traces.conventions`: what a span means under OpenInference, OpenTelemetry's
  GenAI conventions or MLflow's span types (kind, input, output, documents, model, tokens).
- :mod:`raglab.traces.mapping`: one trace -> a SystemOutput plus ``question``,
  ``timestamp``, ``user``, ``session``, ``feedback`` (the table of docs/traces.md).
- :mod:`raglab.traces.source`: a source (a file, or ``mlflow://EXPERIMENT``) -> records,
  with the bad traces counted by kind (:mod:`raglab.traces.problems`);
  :mod:`raglab.traces.match` pairs records with the cases of a replayed run (a session's
  traces, by start time, with a conversation's turns).

Nothing here is imported by ``import raglab``; the MLflow store is read by
:mod:`raglab.tracking.mlflow_traces` (the only package that imports mlflow).
"""
