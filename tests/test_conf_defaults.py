"""conf/ files hold ``name`` and what differs from their schema's defaults: a value equal to
the default of its schema node (``/schema/...`` in the file's defaults list) is a second
source of that default, which could drift from the schema's."""

from __future__ import annotations

import yaml

from raglab.commands.common import conf_dir
from raglab.commands.compose import command_sections
from raglab.config import schema_nodes


def _restated(data: dict, node: dict, where: str) -> list[str]:
    out = []
    for key, value in data.items():
        if key in ("defaults", "name") or key not in node:
            continue
        if isinstance(value, dict) and isinstance(node[key], dict) and value != node[key]:
            out += _restated(value, node[key], f"{where}.{key}")
        elif value == node[key] and type(value) is type(node[key]):
            out.append(f"{where}.{key}: {value!r}")
    return out


def test_no_conf_file_restates_a_schema_default():
    nodes = schema_nodes(command_sections())
    restated, pulled = [], 0
    for path in sorted(conf_dir().rglob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for entry in data.get("defaults") or []:
            if isinstance(entry, str) and entry.lstrip("/").startswith("schema/"):
                node = nodes[entry.lstrip("/").split("@")[0]]
                pulled += 1
                restated += _restated(data, node, str(path.relative_to(conf_dir())))
    assert pulled >= 25  # every run config file starts from its schema node
    assert not restated, "restates the schema's default: " + "; ".join(restated)


def test_every_component_file_pulls_its_own_schema_node():
    for path in sorted(conf_dir().rglob("*.yaml")):
        rel = path.relative_to(conf_dir())
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        nodes = [e for e in data.get("defaults") or []
                 if isinstance(e, str) and e.lstrip("/").startswith("schema/")]
        own = f"schema/{rel.parts[0]}/{data.get('name')}"
        if len(rel.parts) == 2 and own in schema_nodes(command_sections()):
            assert nodes == [f"/schema/{rel.parts[0]}/{data['name']}@_here_"], rel
