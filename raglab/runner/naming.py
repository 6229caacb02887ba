"""Short run names built from the (redacted) configuration: ``langchain size=128 k=5``.

A name starts with the kind of system the run measured (``langchain``, ``llamaindex``,
``http``, ``python``; ``replay:STEM`` with the stem of the replayed file; the reference
pipeline left implicit), then lists the value of each key the user set (for a job of a
sweep: each swept key) that differs from the composed defaults, read back from the redacted
configuration rather than from the command line, so a secret passed as an override can
never reach a run name. A key is shown by the shortest ending no other setting shares
(``chunker.size`` -> ``size``; ``grader.model`` beside ``generator.model``); a path by its
file name; an http URL without its scheme (an https one with it); a config group by its
choice; the dataset by its name; a long value cut in the middle. Keys that say how a run is
recorded (``concurrency``, ``tracking``, ...) are named only when a sweep varies them. A
sweep's own name (:func:`sweep_name`) is its kind, each swept key with its values, and its
other settings. At most 60 characters; a name that shows less than its settings ends with a
labelled fingerprint of them (``(path #3fa2c1)``).

A sweep's jobs and swept keys are read from its overrides and the ``hydra.sweeper.params``
of its configuration (an ``experiment/`` file may declare the whole study there) with Hydra's
own override parser and basic sweeper, so job ``N`` here is Hydra's job ``N``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

from raglab.compare.naming import MAX_VALUE, middle, system_kind
from raglab.errors import ConfigError
from raglab.secrets import is_secret_key

#: keys that say where or how a run is recorded, not what it measures: left out of a name
#: unless a sweep varies them (its jobs would share a name; ``concurrency`` changes latency)
_NOT_NAMING = ("tracking", "cache_dir", "progress", "concurrency", "plugins")
#: keys never named: Hydra's own, and the name itself
_NEVER_NAMING = ("hydra", "run_name")
REDACTED = "***"


def override_key(override: str) -> str:
    """``+a.b=1`` -> ``a.b``; ``hydra/launcher=joblib`` -> ``hydra/launcher``."""
    return override.split("=", 1)[0].lstrip("+~")


def _lookup(cfg: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


#: the longest run name (MLflow's run table cuts longer ones, so two names would look alike)
MAX_NAME = 60


#: the scheme a name leaves implicit, and the one it shows
_HTTP, _HTTPS = "http://", "https://"


def _show(value: Any) -> str:
    return _shown(value)[0]


def _shown(value: Any) -> tuple[str, bool]:
    """The value as a name shows it, and whether that lost anything: an http URL without
    its scheme, credentials and query (``http://127.0.0.1:8000/v1`` -> ``127.0.0.1:8000/v1``),
    an https one with its scheme (``https://judge:8443/v1``), a path as its file name, a long
    value cut in the middle (an https URL's scheme not counted)."""
    if isinstance(value, bool):
        return ("true" if value else "false"), False
    if value is None:
        return "null", False
    if isinstance(value, float):
        return f"{value:g}", f"{value:g}" != repr(value)
    if isinstance(value, (list, tuple)):
        items = [_shown(v) for v in value]
        text = "[" + ",".join(t for t, _ in items) + "]"
        lossy = any(cut for _, cut in items)
    else:
        text, lossy = _shown_text(str(value))
    scheme = _HTTPS if text.startswith(_HTTPS) else ""
    if len(text) - len(scheme) > MAX_VALUE:  # one long value must not hide the others
        return scheme + middle(text[len(scheme):]), True
    return text, lossy


def _shown_text(text: str) -> tuple[str, bool]:
    if "://" in text:
        from urllib.parse import urlsplit

        try:
            url = urlsplit(text)
            host = url.netloc.rpartition("@")[2]  # never the user:password part
        except ValueError:
            host = ""
        if host:
            shown = host + url.path  # a trailing "/" kept: ``h/v1/`` is not ``h/v1``
            if text.startswith(_HTTPS):
                shown = _HTTPS + shown
            # shortened unless the URL reads back whole (``http://`` the one scheme implied):
            # not for a user:password, a query, a fragment, another scheme or its spelling
            return shown, (shown if shown.startswith(_HTTPS) else _HTTP + shown) != text
    elif "/" in text:  # a path: its file name
        name = PurePath(text).name or text
        return name, name != text
    return text, False


def name_parts(public: Mapping[str, Any], keys: Iterable[str],
               choices: Mapping[str, Any] | None = None,
               defaults: Mapping[str, Any] | None = None,
               swept: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``[(key, shown value)]`` for each naming key, secrets and bookkeeping keys left out
    (``defaults``: the composed defaults; a key set to its default value is left out;
    ``swept``: a sweep's keys, named even at their default or when bookkeeping)."""
    return [(k, shown) for k, shown, _, _ in _parts(public, keys, choices, defaults, swept)]


def _parts(public: Mapping[str, Any], keys: Iterable[str],
           choices: Mapping[str, Any] | None = None,
           defaults: Mapping[str, Any] | None = None, swept: Iterable[str] = ()
           ) -> list[tuple[str, str, str, bool]]:
    """``[(key, shown value, full value, shortened)]``: :func:`name_parts` with the values
    unshortened. The files of a dataset (``dataset.cases=...``) are shown as its name,
    once (shortened: the name does not say which files). ``swept``: the keys of a sweep,
    each named even at its default value (every job shows every swept key) and even when
    it only says how the run is recorded (``concurrency``); never a secret's value."""
    choices = choices or {}
    always = {override_key(k) for k in swept}
    out: list[tuple[str, str, str, bool]] = []
    seen: set[str] = set()
    for key in keys:
        key = override_key(key)
        named = key in always
        if key.startswith("dataset.") and defaults is not None and not named:
            key = "dataset"  # the dataset's files and settings: its name says which
        top = key.split(".")[0].split("/")[0]
        if key in seen or top in _NEVER_NAMING or (top in _NOT_NAMING and not named):
            continue
        seen.add(key)
        if any(is_secret_key(part) for part in key.split(".")):
            continue
        base = None if named else defaults
        if key in choices and "." not in key and not (key == "dataset" and defaults):
            choice = choices[key]
            if choice is not None and not _is_default(base, key, choice, group=True):
                shown, lossy = _shown(choice)
                out.append((key, shown, repr(choice), lossy))
            continue
        found, value = _lookup(public, key)
        if not found or value == REDACTED:
            continue
        if key == "dataset" and isinstance(value, Mapping):
            same = base is not None and all(
                _lookup(base, f"dataset.{k}") == (True, v) for k, v in value.items())
            if not same:
                out.append((key, _show(value.get("name")), repr(sorted(value.items())), True))
            continue
        if _is_default(base, key, value):
            continue
        if isinstance(value, Mapping):
            if "name" not in value:
                continue
            value = value["name"]
        shown, lossy = _shown(value)
        out.append((key, shown, repr(value), lossy))
    return out


def _is_default(defaults: Mapping[str, Any] | None, key: str, value: Any,
                group: bool = False) -> bool:
    if defaults is None:
        return False
    found, default = _lookup(defaults, key)
    if group and found and isinstance(default, Mapping):
        return default.get("name") == value
    return found and default == value


def short_labels(keys: list[str], others: Iterable[str] = ()) -> dict[str, str]:
    """Each key by its shortest dotted ending that no other key (of ``keys`` or ``others``,
    e.g. every setting of the configuration) shares: ``chunker.size`` -> ``size``, but
    ``grader.model`` and ``generator.model`` stay whole."""
    pool = set(keys) | set(others)

    def label(key: str) -> str:
        parts = key.split(".")
        for n in range(1, len(parts)):
            end = ".".join(parts[-n:])
            if not any(o != key and (o == end or o.endswith("." + end)) for o in pool):
                return end
        return key

    return {k: label(k) for k in keys}


def _leaves(node: Any, prefix: str = "") -> Iterable[str]:
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}{k}.")
    elif prefix:
        yield prefix[:-1]


def _digest(items: Iterable[str]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(items).encode()).hexdigest()[:6]


def _narrow(part: tuple[str, bool, str], width: int) -> tuple[str, bool, str]:
    """A ``label=value`` part with its value cut in the middle to ``width`` characters."""
    text, cut, label = part
    value = text[len(label) + 1:]
    if not text.startswith(label + "=") or len(value) <= width:
        return part
    return f"{label}={middle(value, width)}", True, label


def _fit(head: list[str], parts: list[tuple[str, bool, str]], full: list[str],
         limit: int) -> str:
    """``head`` words, then as many ``parts`` (``(text, shortened, label)``) as fit in
    ``limit`` characters. When the name shows less than ``full`` (a shortened value, or
    parts left out), it ends with a labelled fingerprint of ``full``: ``(path #3fa2c1)``
    (the one shortened setting), ``(settings #3fa2c1)`` (several), ``(+2 more #3fa2c1)``
    (parts left out); never a bare hash."""
    def joined(words: list[str]) -> str:
        return " ".join(w for w in words if w)

    lossy = [label for _, cut, label in parts if cut]
    name = joined(head + [t for t, _, _ in parts])
    if not lossy and len(name) <= limit:
        return name
    digest = _digest(full)
    for what in ([lossy[0]] if len(lossy) == 1 else []) + ["settings"]:
        if len(name) + len(f" ({what} #{digest})") <= limit:
            return f"{name} ({what} #{digest})"
    room = limit - len(f" (+{len(parts)} more #{digest})") - 1  # or "(settings #...)"
    shown: list[tuple[str, bool, str]] = []
    for width in range(MAX_VALUE - 1, 7, -1):  # every setting, each value shorter
        narrow = [_narrow(p, width) for p in parts]
        if len(joined(head + [t for t, _, _ in narrow])) <= room:
            shown = narrow
            break
    else:  # as many as fit, those shown whole first (the fingerprint covers the rest)
        keep: set[int] = set()
        for i in sorted(range(len(parts)), key=lambda i: parts[i][1]):
            if not parts[i][0] or \
                    len(joined(head + [parts[j][0] for j in sorted(keep | {i})])) <= room:
                keep.add(i)
        shown = [parts[i] for i in sorted(keep)]
    dropped = len(parts) - len(shown)
    cut = [label for _, c, label in shown if c]
    what = f"+{dropped} more" if dropped else cut[0] if len(cut) == 1 else "settings"
    name = joined(head + [t for t, _, _ in shown])
    if len(name) + len(f" ({what} #{digest})") > limit and len(what) > len("settings"):
        what = "settings"  # a long label: the fingerprint says it stands for them all
    tail = f" ({what} #{digest})"
    over = len(name) + len(tail) - limit
    if over > 0:  # the head alone is too long: its kind cut first, then its last word
        head = list(head)
        for i in (0, len(head) - 1):
            if over > 0 and head[i]:
                cut_to = max(len(head[i]) - over, min(len(head[i]), 12))
                over -= len(head[i]) - cut_to
                head[i] = middle(head[i], cut_to)
        name = middle(joined(head + [t for t, _, _ in shown]), limit - len(tail))
    name += tail
    return name


def run_name(public: Mapping[str, Any], keys: Iterable[str],
             choices: Mapping[str, Any] | None = None, limit: int = MAX_NAME,
             defaults: Mapping[str, Any] | None = None, swept: Iterable[str] | bool = (),
             kind: bool = True) -> str:
    """``langchain size=128 k=5``: the system's kind (:func:`system_kind`; none for the
    reference pipeline), then the settings that differ from the composed ``defaults``,
    each by the shortest ending of its key no other setting shares, an http URL without its
    scheme (an https one with it), a file as its base name, a long value cut in the middle;
    at most ``limit`` characters. When the name shows less than the settings, it ends with
    a labelled fingerprint of them all (:func:`_fit`), so two runs that differ in any of
    them never share a name. ``defaults`` when nothing is set. ``swept``: a sweep's swept
    keys, each named at its default too (and when it only says how the run is recorded),
    first (``True``: every key of ``keys``). ``kind``: False leaves the system's kind out."""
    keys = [override_key(k) for k in keys]
    swept_keys = keys if swept is True else [override_key(k) for k in (swept or [])]
    ordered = list(dict.fromkeys(swept_keys + keys))
    shown_kind, full_kind, kind_cut = system_kind(public) if kind else ("", "", False)
    skip = {"system"} | ({"system.path"} if full_kind.startswith("replay:") else set())
    if shown_kind:
        ordered = [k for k in ordered if k not in skip]
    parts = _parts(public, ordered, choices, defaults, swept_keys)
    if not parts and not shown_kind:
        return "defaults"
    labels = short_labels([k for k, _, _, _ in parts], _leaves(public))
    items = [(f"{labels[k]}={shown}", cut, labels[k]) for k, shown, _, cut in parts]
    full = [full_kind] + [f"{k}={value}" for k, _, value, _ in parts]
    head = [shown_kind]
    if kind_cut:  # the replayed file's folder: said by the fingerprint
        items.insert(0, ("", True, "path"))
    return _fit(head, items, full, limit)


def job_name(given: str | None, public: Mapping[str, Any], keys: Iterable[str],
             choices: Mapping[str, Any] | None, defaults: Mapping[str, Any] | None,
             swept: list[str]) -> str:
    """A run's name: ``run_name=...`` when given (in a sweep, followed by the job's swept
    values, ``baseline k=3``, so its jobs stay apart), else :func:`run_name`."""
    if not given:
        return run_name(public, keys, choices, defaults=defaults, swept=swept)
    if not swept:
        return given
    values = run_name(public, swept, choices, limit=MAX_NAME - 8, swept=True, kind=False)
    if values == "defaults":  # no swept value it may show (a secret): not "given defaults"
        return given
    return f"{middle(given, MAX_NAME - len(values) - 1)} {values}"


def sweep_name(keys: list[str], values: Mapping[str, Iterable[Any]] | None = None,
               public: Mapping[str, Any] | None = None, fixed: Iterable[str] = (),
               choices: Mapping[str, Any] | None = None,
               defaults: Mapping[str, Any] | None = None, limit: int = MAX_NAME) -> str:
    """The parent run of a sweep: ``langchain sweep size=64,128 × k=3,5 grader=openai``:
    the system's kind, the swept keys with their values, then the sweep's other settings
    that differ from the composed ``defaults`` (``fixed``: their keys, e.g. the command
    line's other overrides, ``experiment`` among them), read from ``public`` (a job's
    redacted configuration); at most ``limit`` characters, fingerprinted as
    :func:`run_name` when it shows less."""
    public = public or {}
    labels = short_labels([override_key(k) for k in keys], _leaves(public))
    values = values or {}
    axes = []
    for key, label in labels.items():
        given = list(dict.fromkeys(values.get(key, values.get(label, []))))
        vals = [_shown(v) for v in given]
        text = ",".join(t for t, _ in vals)
        shown = middle(text, 2 * MAX_VALUE)
        axes.append((f"{label}={shown}" if text else label,
                     shown != text or any(c for _, c in vals), label, f"{key}={given!r}"))
    shown_kind, full_kind, kind_cut = system_kind(public)
    if "system" in labels:  # the system itself swept: each job says its own
        shown_kind, full_kind, kind_cut = "", "", False
    elif "system.path" in labels and full_kind.startswith("replay:"):  # files swept
        shown_kind, full_kind, kind_cut = "replay", "replay", False
    skip = set(labels) | {"system", "system.path"} if shown_kind else set(labels)
    others = [k for k in (override_key(f) for f in fixed) if k not in skip]
    parts = _parts(public, others, choices, defaults) if public else []
    olabels = short_labels([k for k, _, _, _ in parts], _leaves(public))
    # the axes are never left out (a cut in their values is fingerprinted as "values")
    items = [("", True, "values")] if any(c for _, c, _, _ in axes) else []
    items += [(f"{olabels[k]}={shown}", cut, olabels[k]) for k, shown, _, cut in parts]
    if kind_cut:
        items.insert(0, ("", True, "path"))
    full = ([full_kind] + [f for _, _, _, f in axes]
            + [f"{k}={value}" for k, _, value, _ in parts])
    return _fit([shown_kind, "sweep", " × ".join(t for t, _, _, _ in axes)], items, full,
                limit)


# ---- a sweep's jobs (Hydra's override grammar and its basic sweeper's job order) --------
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def sweeper_params(sweeper: Any) -> dict[str, str]:
    """``hydra.sweeper.params`` of a composed configuration (``{KEY: "v1,v2"}``) when its
    sweeper is Hydra's basic one, whose job order raglab reproduces; ``{}`` otherwise."""
    if sweeper is None:
        return {}
    from omegaconf import DictConfig, OmegaConf

    if isinstance(sweeper, DictConfig):
        sweeper = OmegaConf.to_container(sweeper, resolve=True)
    if not isinstance(sweeper, Mapping) or sweeper.get("_target_") != BASIC_SWEEPER:
        return {}
    params = sweeper.get("params") or {}
    return {str(k): _param_text(v) for k, v in params.items()} if isinstance(params, Mapping) \
        else {}


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def sweep_arguments(overrides: list[str], params: Mapping[str, str] | None = None) -> list[str]:
    """What Hydra's basic sweeper expands: ``hydra.sweeper.params`` as ``KEY=VALUE``, then
    the command line's overrides (a key given on both keeps the command line's value)."""
    return [f"{k}={v}" for k, v in (params or {}).items()] + list(overrides)


def override_values(job: list[str]) -> dict[str, Any]:
    """``{key: value}`` of one job's overrides, as Hydra parses them (``k=3`` -> ``3``,
    ``url=http\\://h`` -> ``http://h``); ConfigError for one it cannot parse."""
    out: dict[str, Any] = {}
    for o in _parse(job):
        if o.is_delete():
            continue
        value = o.value()
        out[o.get_key_element().lstrip("+~")] = value
    return out


def _parse(arguments: list[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        return OverridesParser.create().parse_overrides(arguments)
    except OverrideParseException as e:
        raise ConfigError(f"override: {str(e).strip().splitlines()[0]}") from None


def job_overrides(overrides: list[str], multirun: bool,
                  params: Mapping[str, str] | None = None) -> list[list[str]]:
    """Each job's overrides, in Hydra's job order (its basic sweeper's cartesian product of
    ``hydra.sweeper.params`` and the command line)."""
    if not multirun:
        return [list(overrides)]
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    batches = BasicSweeper.split_arguments(_parse(sweep_arguments(overrides, params)), None)
    return [job for batch in batches for job in batch]


def swept_keys(overrides: list[str], params: Mapping[str, str] | None = None) -> list[str]:
    """The keys a sweep varies, in Hydra's order (``hydra.sweeper.params`` ``{k: 3,5}`` and
    ``chunker.size=64,128`` -> ``["k", "chunker.size"]``), Hydra's own keys left out. As in
    Hydra's basic sweeper, a key set twice keeps its first place and its last value."""
    try:
        parsed = _parse(sweep_arguments(overrides, params))
    except ConfigError:  # reported by validate_jobs
        return []
    final: dict[str, bool] = {}
    for o in parsed:
        final[o.get_key_element()] = o.is_sweep_override()
    return [k.lstrip("+~") for k, swept in final.items()
            if swept and not k.startswith(("hydra.", "hydra/"))]
