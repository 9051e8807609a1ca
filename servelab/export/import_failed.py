"""The one error an import raises: a file another tool wrote that servelab cannot read as a
row, said in one line that names the file and the field (servelab.export.importers)."""


class ImportFailed(ValueError):
    pass
