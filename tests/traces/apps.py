"""The LangChain pipeline of docs/pipelines.md (``my_rag``), traced the way a team traces
its app: OpenInference's LangChain instrumentor with OpenTelemetry's SDK, the spans written
as the OpenTelemetry Collector's file exporter writes them (OTLP JSON, one
``ExportTraceServiceRequest`` a line, hex ids); or MLflow's LangChain autologging into a
tracking store. Each is a factory module for ``system=langchain``, so one ``raglab run``
runs the pipeline live and leaves its traces behind."""

from __future__ import annotations

from pathlib import Path

from tests.systems.test_pipelines import _example

#: an OTLP JSON file exporter: the Collector's encoding (OTLP proto -> JSON, ids in hex)
OTLP_EXPORTER = '''
import base64
import json
import threading

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_IDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(obj):
    """OTLP/JSON writes trace and span ids as hex (protobuf's own mapping: base64)."""
    if isinstance(obj, dict):
        return {k: base64.b64decode(v).hex() if k in _IDS and v else _hex_ids(v)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_hex_ids(x) for x in obj]
    return obj


class OtlpJsonLines(SpanExporter):
    def __init__(self, path):
        self.path, self.lock = path, threading.Lock()

    def export(self, spans):
        line = json.dumps(_hex_ids(MessageToDict(encode_spans(spans))))
        with self.lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\\n")
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass
'''

OTLP_APP = OTLP_EXPORTER + '''

from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import my_rag

_instrumented = []


def build(config):
    if not _instrumented:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLines(
            config["options"]["traces"])))
        LangChainInstrumentor().instrument(tracer_provider=provider)
        _instrumented.append(provider)
    return my_rag.build(config)
'''

MLFLOW_APP = '''
import atexit

import mlflow

import my_rag

_traced = []


def build(config):
    if not _traced:
        mlflow.set_tracking_uri(config["options"]["store"])
        mlflow.set_experiment(config["options"]["experiment"])
        mlflow.langchain.autolog()
        atexit.register(mlflow.flush_trace_async_logging)
        _traced.append(True)
    return my_rag.build(config)
'''


def write_apps(root: Path) -> None:
    """``my_rag.py`` (the page's example) and the traced factories ``otlp_app.py`` and
    ``mlflow_app.py`` in ``root``."""
    code, _ = _example("my_rag")
    (root / "my_rag.py").write_text(code, encoding="utf-8")
    (root / "otlp_app.py").write_text(OTLP_APP, encoding="utf-8")
    (root / "mlflow_app.py").write_text(MLFLOW_APP, encoding="utf-8")
