"""Read an untrusted YAML file with its size, encoding, nesting depth and alias expansion bounded.

PyYAML builds nested nodes recursively (5,000 levels end in RecursionError)
and keeps aliases as shared references (a "billion laughs" file loads in
microseconds, then explodes in whatever walks it). The event stream is flat,
so it is checked first: depth and expanded size, with the key path of the
offending spot for the error message. Only then is the document built.
"""

from __future__ import annotations

from typing import Any

from spark_watchd.errors import ConfigError

MAX_BYTES = 1 << 20  # a web config is a few hundred bytes; /dev/zero must not be read forever
MAX_DEPTH = 16  # the exporter-toolkit format is 3 levels deep
MAX_NODES = 10_000  # counting every alias as the nodes it stands for


def read_text(path: str) -> str:
    """The file's text (UTF-8, at most MAX_BYTES); ConfigError naming the file otherwise."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read web config: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL in the path itself
        raise ConfigError(f"{path!r}: cannot read web config: {exc}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{path}: web config is over {MAX_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        before = raw[raw.rfind(b"\n", 0, exc.start) + 1 : exc.start].decode("utf-8", "replace").strip()
        raise ConfigError(
            f"{path}: web config is not UTF-8 text: line {line}, after {before!r} (byte {exc.start})"
        ) from None


def load(path: str, text: str) -> Any:
    """The YAML document in `text`, after the flat checks; ConfigError names file, key and reason."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_events(path, yaml.parse(text, Loader=loader))
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}".replace("\n", " ")) from None


class _Walk:
    """Depth, expanded size and the key path, one event at a time."""

    def __init__(self, path: str):
        self.path = path
        self.stack: list[list] = []  # per open collection: [is_mapping, expecting_key, current label]
        self.anchors: dict[str, int] = {}  # anchor -> nodes it stands for
        self.opened: list[tuple[str | None, int]] = []  # (anchor, nodes before) per open collection
        self.nodes = 0

    def where(self) -> str:
        return ".".join(str(f[2]) for f in self.stack if f[2] is not None) or "(document)"

    def fail(self, reason: str) -> ConfigError:
        return ConfigError(f"{self.path}: key '{self.where()}': {reason}".replace("\n", " "))

    def _begin(self, key_label: object) -> None:
        if self.stack:
            frame = self.stack[-1]
            if not frame[0]:
                frame[2] = 0 if frame[2] is None else frame[2] + 1
            elif frame[1]:
                frame[2] = str(key_label)[:60]

    def _end(self) -> None:
        if self.stack and self.stack[-1][0]:
            self.stack[-1][1] = not self.stack[-1][1]

    def step(self, ev) -> None:
        import yaml

        if isinstance(ev, yaml.ScalarEvent):
            self._begin(ev.value)
            self.nodes += 1
            if ev.anchor:
                self.anchors[ev.anchor] = 1
            self._end()
        elif isinstance(ev, yaml.AliasEvent):
            self._begin("*" + ev.anchor)
            self.nodes += self.anchors.get(ev.anchor, 1)
            self._end()
        elif isinstance(ev, yaml.CollectionStartEvent):
            self._begin("?")  # a collection used as a key
            self.opened.append((ev.anchor, self.nodes))
            self.nodes += 1
            self.stack.append([isinstance(ev, yaml.MappingStartEvent), True, None])
            if len(self.stack) > MAX_DEPTH:
                raise self.fail(f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(ev, yaml.CollectionEndEvent):
            self.stack.pop()
            anchor, before = self.opened.pop()
            if anchor:
                self.anchors[anchor] = self.nodes - before
            self._end()
        if self.nodes > MAX_NODES:
            raise self.fail(f"expands to more than {MAX_NODES} nodes (aliases of aliases?)")


def _check_events(path: str, events) -> None:
    import yaml

    walk = _Walk(path)
    try:
        for ev in events:
            walk.step(ev)
    except yaml.YAMLError as exc:  # name where the parser got to (libyaml itself stops at 1,000 levels)
        raise walk.fail(f"invalid YAML: {exc}") from None
