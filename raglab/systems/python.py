"""Python adapter: ``system._target_=pkg.module.factory`` builds the user's system object."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from raglab.components import NO_CONTEXT, BuildContext, System
from raglab.config import UNLISTED
from raglab.data.schema import Strict, SystemOutput
from raglab.errors import ConfigError
from raglab.registry import register
from raglab.secrets import clip
from raglab.systems.base import SystemRequest
from raglab.systems.outputs import (
    MAX_BODY_BYTES,
    AddedFieldsWarning,
    OutputError,
    json_size_over,
    read_output,
)


class PythonSystemCfg(Strict):
    name: Literal["python"]
    target: str = Field(alias="_target_")
    options: dict[str, Any] = Field(default_factory=dict)
    # as the http system's (not in conf/system/python.yaml; set with +system.max_body_bytes=N)
    max_body_bytes: int = Field(MAX_BODY_BYTES, gt=0, le=2 ** 31, json_schema_extra=UNLISTED)


@register("system", "python", config=PythonSystemCfg)
class PythonSystem(System):
    """Makes the user's system, from ``system._target_`` and ``system.options``: the
    object built is the user's own (``PythonSystem(cfg, ctx)`` returns it)."""

    def __new__(cls, cfg: PythonSystemCfg, ctx: BuildContext = NO_CONTEXT) -> Any:
        return Tolerant(load_python_system(cfg.target, cfg.options), cfg.max_body_bytes)

    @classmethod
    def identity(cls, run_cfg: Any) -> dict[str, str]:
        """The target and the SHA-256 of the source file of its module (found as it will be
        imported; nothing is imported here). A module not found has none."""
        import importlib.util

        from raglab.data.dataset import file_sha256

        target = run_cfg.system.target
        module_name = target.rpartition(".")[0]
        out = {"python_target": target}
        try:
            on_path()
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            return out
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            out["python_source_sha256"] = file_sha256(Path(spec.origin))
        return out


class Tolerant:
    """The user's system, its answers read as http reads a response body: an answer larger
    than ``max_body_bytes`` as JSON (its strings counted in UTF-8, every field: the answer,
    the hits' text, added fields) fails that case, so nothing that size is graded or
    written; fields it adds are kept (hits: ``metadata``; the output: ``extra``) with one
    warning per run, and a named field with a wrong value fails that case with one line
    naming the field and the case (:func:`raglab.systems.outputs.read_output`)."""

    def __init__(self, system: Any, max_body_bytes: int = MAX_BODY_BYTES):
        self.system = system
        self.max_body_bytes = max_body_bytes
        self.blocking = getattr(system, "blocking", True)
        self._warn = AddedFieldsWarning()

    def answer(self, request: SystemRequest) -> SystemOutput:
        added: list[str] = []
        data = self.system.answer(request)
        if json_size_over(data, self.max_body_bytes):
            raise OutputError(f"answer larger than {self.max_body_bytes} bytes "
                              "(system.max_body_bytes)")
        out = read_output(data, request.case_id, added=added)
        self._warn(added)
        return out

    def __getattr__(self, name: str) -> Any:  # anything else the user's object offers
        if name == "system":
            raise AttributeError(name)
        return getattr(self.system, name)


def load_python_system(target: str, options: dict):
    module_name, _, attr = target.rpartition(".")
    if not module_name:
        raise ConfigError(f"config system._target_: {target!r} is not 'package.module.factory'")
    module = import_user_module(module_name, "config system._target_")
    factory = getattr(module, attr, None)
    if factory is None or not callable(factory):
        raise ConfigError(f"config system._target_: {module_name!r} has no callable {attr!r}")
    try:
        system = factory(dict(options))
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's factory failed: one line
        msg = clip(" ".join(str(e).split()), 300)  # scrubbed, then cut
        raise ConfigError(f"config system._target_: {target}(options) raised "
                          f"{type(e).__name__}: {msg}") from None
    if not callable(getattr(system, "answer", None)):
        raise ConfigError(f"config system._target_: {target} returned an object without "
                          "an answer(request) method (see raglab.systems.base.SystemUnderTest)")
    return system


def import_user_module(module_name: str, where: str) -> Any:
    """The user's module, found as ``python -m`` finds it (the working directory first);
    a ConfigError starting with ``where`` when it cannot be imported."""
    try:
        return _import(module_name)
    except Exception as e:  # noqa: BLE001 - ImportError, or the module failed at import
        hint = ""
        if isinstance(e, ModuleNotFoundError) and e.name == module_name.split(".")[0]:
            hint = (f" (looked in the working directory {os.getcwd()} and the installed "
                    "packages; make it importable with PYTHONPATH=ITS_FOLDER or "
                    "pip install -e ITS_PROJECT)")
        raise ConfigError(f"{where}: cannot import {module_name!r}: "
                          f"{type(e).__name__}: {clip(' '.join(str(e).split()), 300)}{hint}"
                          ) from None


def _import(module_name: str) -> Any:
    """The module, found as ``python -m`` finds it: the working directory first (the
    ``raglab`` script alone would look only in the installed packages)."""
    on_path()
    return importlib.import_module(module_name)


def on_path() -> None:
    """The working directory on the import path (as ``python -m`` has it)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
