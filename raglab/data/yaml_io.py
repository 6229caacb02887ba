"""The one way raglab reads YAML it did not write itself: safe tags only, bounded aliases.

PyYAML's ``SafeLoader`` builds no Python objects from tags (``!!python/object/apply:...``
is refused), but it still expands aliases: a file of a few hundred bytes whose anchors
refer to each other ("billion laughs") stands for billions of nodes, which OmegaConf and
pydantic then copy one by one. :func:`load_yaml` counts the nodes a document stands for,
aliases expanded, before building anything, and refuses one above :data:`MAX_NODES` (or an
alias that refers to itself), or nested deeper than :data:`MAX_DEPTH`, with one
:class:`~raglab.errors.UserError` line naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raglab.errors import UserError
from raglab.secrets import clip_line

#: the most nodes (scalars, lists, mappings; aliases counted as what they expand to) a
#: YAML document may stand for: configuration files hold hundreds
MAX_NODES = 100_000
#: the deepest nesting of lists and mappings a YAML document may have
MAX_DEPTH = 200

__all__ = ["MAX_DEPTH", "MAX_NODES", "load_yaml", "load_yaml_file"]


class _TooBig(Exception):
    pass


def _expanded_size(root: Any) -> int:
    """The number of nodes ``root`` stands for with every alias expanded (each distinct
    node sized once, so a bomb is measured without being expanded); _TooBig beyond the
    bounds or for a node that contains itself."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise _TooBig(f"nested deeper than {MAX_DEPTH} levels")
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise _TooBig("an alias refers to a node that contains it")
        total = 1
        if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            open_nodes.add(key)
            children = (node.value if isinstance(node, yaml.SequenceNode)
                        else [n for pair in node.value for n in pair])
            for child in children:
                total += size(child, depth + 1)
                if total > MAX_NODES:
                    raise _TooBig(f"its aliases expand to more than {MAX_NODES:,} nodes")
            open_nodes.discard(key)
        sizes[key] = total
        return total

    return size(root, 0)


def load_yaml(text: str, source: str) -> Any:
    """The data of one YAML document (None when empty); UserError naming ``source`` when it
    is not valid YAML, uses a tag that is not plain data, or is too big once expanded."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except _TooBig as e:
        raise UserError(f"YAML refused: {e}", file=source) from None
    except RecursionError:
        raise UserError(f"YAML refused: nested deeper than {MAX_DEPTH} levels",
                        file=source) from None
    except yaml.constructor.ConstructorError as e:
        raise UserError(f"YAML refused: {e.problem} (plain data only)", file=source) from None
    except yaml.YAMLError as e:
        raise UserError(f"invalid YAML ({clip_line(e, 200)})", file=source) from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path) -> Any:
    """:func:`load_yaml` of a file; UserError when it cannot be read."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"not valid UTF-8 (byte {e.start + 1})", file=str(p)) from None
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror or e}", file=str(p)) from None
    return load_yaml(text, str(p))
