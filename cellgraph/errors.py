"""Exceptions raised by cellgraph. Every message names the offending object and the rule."""


class CellGraphError(ValueError):
    """An invalid cell graph, tree, layout or registry entry."""


class FormatError(CellGraphError):
    """A file or document that does not follow its documented format.

    ``path`` is the location of the bad field inside the document, e.g. ``children[1].act``;
    ``message`` the problem and ``source`` the file (or other origin), where known.
    """

    def __init__(self, path: str, message: str, source: str | None = None) -> None:
        self.path = path
        self.message = message
        self.source = source
        where = f"{source}: " if source else ""
        at = f"{path}: " if path else ""
        super().__init__(f"{where}{at}{message}")
