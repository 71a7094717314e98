"""`modellint server`: the static pass as a Language Server over stdio (pygls).

Open `.py` files and the code cells of open notebooks are linted with the same engine,
configuration (the nearest `pyproject.toml` with a `[tool.modellint]` table) and plugins as
`modellint check`: on open and save at once, on change after a short pause. Code actions give
each fix, a `# noqa` comment and "fix all safe fixes"; hovering over a finding shows its rule's
documentation, to which each diagnostic's code also links. The runtime pass is
not part of the server: it never imports torch or runs the code it reads. Plugins named by the
repository's config load only with the same opt-in as `check` (`--allow-config-plugins` or
`MODELLINT_ALLOW_CONFIG_PLUGINS=1`).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import io
import logging
import os
import re
import shutil
import tempfile
import threading
import tokenize
import traceback
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

import modellint
from modellint.config import Config, ConfigError, find_pyproject, is_excluded, load_config
from modellint.finding import Finding, Severity
from modellint.fix import (
    PythonText,
    applicable,
    apply_fixes_deeply,
    apply_text_fixes,
    check_parses,
    fix_rounds,
)
from modellint.plugins import PluginError
from modellint.records import record
from modellint.static import noqa
from modellint.static.engine import INTERNAL_ERROR, SYNTAX_ERROR, FileResult, error_finding
from modellint.static.linter import Linter
from modellint.static.needs import project_codes, reads_project

NAME = "modellint"
# seconds of quiet after a change before the file is linted again
DEBOUNCE_SECONDS = 0.2
# a project with more files than this is read for its index in a thread (seconds, cold)
READ_PROJECT_IN_THREAD_FROM = 200
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{NAME}"
SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]")

log = logging.getLogger(__name__)


@record
class Project:
    """The settings for the files under one config (or none): what `check` would use."""

    config: Config
    rules: list = field(default_factory=list)
    enabled: set[str] = field(default_factory=set)
    registry: Any = None
    # what `modellint.session.Settings` resolved for it (None: it failed to load)
    settings: Any = None
    error: str | None = None
    # the project index (`modellint.static.index.ProjectIndex`): the project's files from
    # disk, each open document's text in place of its file's; built on first use
    index: Any = None
    reading: bool = False  # a thread is reading the project for its index


@record
class Linted:
    """The last lint of a document or a notebook, kept for code actions."""

    version: int | None
    text: str  # what was linted: the document, or a notebook's code cells joined
    result: FileResult  # the engine's (its module, for fixes)
    findings: list[Finding]  # in a notebook, with lines in their cell
    project: Project
    display: str
    disabled: frozenset[str]
    book: Any = None  # a notebook's `Notebook`
    cells: dict[int, str] = field(default_factory=dict)  # cell number -> its document's URI
    sources: dict[int, str] = field(default_factory=dict)  # cell number -> its text

    def source(self, cell: int | None) -> str:
        return self.text if cell is None else self.sources[cell]


class RuleDocs:
    """Each rule's documentation (what `modellint rule CODE` prints) as a Markdown file, so
    that a diagnostic's code links to it: written on first use into a private folder that is
    removed when the server exits."""

    def __init__(self) -> None:
        self._folder: Path | None = None
        self._uris: dict[str, str] = {}
        atexit.register(self.remove)

    def uri(self, rule) -> str | None:
        if rule is None:
            return None
        found = self._uris.get(rule.code)
        if found is None:
            from modellint.report.rule_docs import render_rule_doc

            try:
                if self._folder is None:
                    self._folder = Path(tempfile.mkdtemp(prefix="modellint-rules-"))
                path = self._folder / f"{rule.code}.md"
                path.write_text(render_rule_doc(rule), encoding="utf-8")
            except OSError:
                return None
            found = self._uris[rule.code] = path.as_uri()
        return found

    def remove(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
            self._uris.clear()


class ModellintServer(LanguageServer):
    def __init__(self, plugins: list[str], allow_config_plugins: bool) -> None:
        super().__init__(
            NAME, modellint.__version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[types.NotebookDocumentFilterWithCells(
                    notebook="jupyter-notebook",
                    cells=[types.NotebookCellLanguage(language="python")])],
                save=True,
            ),
        )
        self.plugins = plugins
        self.allow_config_plugins = allow_config_plugins
        self.projects: dict[Path | None, Project] = {}
        self.configs: dict[Path, Path | None] = {}  # folder -> the config that governs it
        self.linted: dict[str, Linted] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.told: set[str] = set()
        # counts the times the project indexes were forgotten: an index read meanwhile is stale
        self.index_generation = 0
        self.docs = RuleDocs()
        self.shut_down = False

    # -- settings --------------------------------------------------------------------------

    def project_for(self, path: Path) -> Project:
        folder = path.parent
        try:
            if folder not in self.configs:
                # looked up once per folder, until a pyproject.toml changes
                self.configs[folder] = find_pyproject(folder)
            pyproject = self.configs[folder]
        except ConfigError as exc:
            return self._failed(Config(root=folder), str(exc))
        project = self.projects.get(pyproject)
        if project is None:
            project = self.projects[pyproject] = self._load(pyproject, path.parent)
        return project

    def _load(self, pyproject: Path | None, folder: Path) -> Project:
        from modellint.session import Overrides, Session

        try:
            config = load_config(pyproject)
            if pyproject is None:
                config = dataclasses.replace(config, root=folder)
            session = Session.for_config(
                config, Overrides(plugins=tuple(self.plugins),
                                  allow_config_plugins=self.allow_config_plugins),
                tell=lambda message: self.tell(message, warning=True))
        except (ConfigError, PluginError) as exc:
            return self._failed(Config(root=folder), str(exc))
        settings = session.settings
        return Project(config=settings.config, rules=list(settings.static_rules),
                       enabled=set(settings.enabled), registry=settings.registry,
                       settings=settings)

    def _failed(self, config: Config, message: str) -> Project:
        self.tell(f"{message}; files under it are not linted until it is fixed")
        return Project(config=config, error=message)

    def tell(self, message: str, warning: bool = False) -> None:
        """Show `message` to the user once (until the configuration changes)."""
        if message in self.told:
            return
        self.told.add(message)
        self.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning if warning else types.MessageType.Error,
            message=f"modellint: {message}"))

    def forget_settings(self) -> None:
        self.projects.clear()
        self.configs.clear()
        self.told.clear()
        self.lint_open_documents()

    def lint_open_documents(self) -> None:
        for uri in list(self.workspace.text_documents):
            if (not _is_config(uri)
                    and self.workspace.get_notebook_document(cell_uri=uri) is None):
                self.lint_now(uri)
        for notebook in list(self.workspace.notebook_documents):
            self.lint_notebook(notebook)

    # -- linting ---------------------------------------------------------------------------

    def schedule(self, uri: str) -> None:
        self.cancel(uri)
        loop = asyncio.get_running_loop()
        self.pending[uri] = loop.call_later(DEBOUNCE_SECONDS, self.lint_now, uri)

    def cancel(self, uri: str) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()

    def lint_now(self, uri: str) -> None:
        self.cancel(uri)
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            self.lint_notebook(notebook.uri)
            return
        if self.workspace.get_notebook_document(notebook_uri=uri) is not None:
            self.lint_notebook(uri)
            return
        document = self.workspace.text_documents.get(uri)
        if document is None:
            self.linted.pop(uri, None)
            return
        linted = self.lint_text(uri, document.source, document.version)
        diagnostics = [] if linted is None else self.diagnostics(linted, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, diagnostics=diagnostics, version=document.version))

    def settings(self, uri: str) -> tuple[Project, Path, frozenset[str]] | None:
        """What `check` would lint the file `uri` with: None for a file the settings exclude
        or that cannot be linted (the reason was shown to the user)."""
        path = Path(to_fs_path(uri) or "untitled.py")
        project = self.project_for(path)
        if project.error is not None:
            return None
        if path.is_absolute() and is_excluded(project.config, path):
            return None
        return project, path, project.settings.disabled_for(path)

    def lint_text(self, uri: str, text: str, version: int | None) -> Linted | None:
        settings = self.settings(uri)
        if settings is None:
            self.linted.pop(uri, None)
            return None
        project, path, disabled = settings
        display = str(path)
        data = _encode(text)
        try:
            index = None
            if reads_project(project_codes(project.rules), [disabled]):
                # only a rule that reads the project's other files needs their index
                index = self.project_index(project, path)
                index.add_source(display, data, project.config.max_code_bytes)
            result = Linter(project.rules, project.config.rule_options(), index).lint(
                display, data, disabled)
        except Exception as exc:  # noqa: BLE001 - one document must not stop the server
            result = self._failed_lint(uri, display, text, exc)
        for text_back in result.tracebacks:
            log.error("%s", text_back)
        linted = Linted(version, text, result, result.findings, project, display, disabled)
        self.linted[uri] = linted
        return linted

    def project_index(self, project: Project, path: Path) -> Any:
        """The index of the project `path` belongs to (as `check` on that one file reads it),
        with the text of every open document of it. Read from disk again after a file of the
        project changes there (`forget_index`); unchanged files' facts come from the cache. A
        large project is read in a thread: until it is, a document is linted alone (what it
        would learn from other files is not reported yet), then every open one again."""
        from modellint.static.index import ProjectIndex

        if project.index is not None:
            return project.index
        from modellint.static.discover import SUFFIXES, project_files, project_root

        root = project_root(project.config.source, [str(path)])
        if root is None:
            # no config nor repository: the document alone (the folders without either share
            # one settings object, not one project)
            return ProjectIndex()
        if project.reading:
            return ProjectIndex()
        files = [(os.path.abspath(found), found) for _, found in project_files(
            root, [], lambda path, _: is_excluded(project.config, path), SUFFIXES,
            lambda message: self.tell(message, warning=True))]
        inside = os.path.join(os.path.abspath(root), "")
        if len(files) <= READ_PROJECT_IN_THREAD_FROM:
            project.index = self._with_open_documents(self._read_index(project, files), inside)
            return project.index
        project.reading = True
        generation = self.index_generation
        loop = asyncio.get_running_loop()

        def read() -> None:
            try:
                index = self._read_index(project, files)
            except Exception as exc:  # noqa: BLE001 - the documents are linted alone then
                log.error("reading the project %s failed: %s", root, exc)
                index = None
            loop.call_soon_threadsafe(done, index)

        def done(index: Any) -> None:
            project.reading = False
            if index is not None and generation == self.index_generation:
                project.index = self._with_open_documents(index, inside)
                self.lint_open_documents()

        threading.Thread(target=read, name="modellint-project-index", daemon=True).start()
        return ProjectIndex()

    @staticmethod
    def _read_index(project: Project, files: list) -> Any:
        from modellint.session import cache_for
        from modellint.static.index import index_files

        return index_files(files, cache_for(project.config, project.rules),
                           max_code_bytes=project.config.max_code_bytes)

    def _with_open_documents(self, index: Any, inside: str) -> Any:
        """`index` with the text of each open Python document under the folder `inside` in
        place of its file's."""
        from modellint.static.discover import SUFFIXES

        for uri, document in list(self.workspace.text_documents.items()):
            path = to_fs_path(uri)
            if (path is not None and path.startswith(inside) and path.endswith(SUFFIXES)
                    and self.workspace.get_notebook_document(cell_uri=uri) is None):
                index.add_source(path, _encode(document.source))
        return index

    def forget_index(self) -> None:
        """Files changed on disk: each project's index is read again when next needed."""
        self.index_generation += 1
        for project in self.projects.values():
            project.index = None

    def _failed_lint(self, uri: str, display: str, text: str, exc: Exception) -> FileResult:
        log.error("linting %s failed:\n%s", uri, "".join(traceback.format_exception(exc)))
        result = FileResult(path=display, source=text)
        result.findings.append(error_finding(
            INTERNAL_ERROR, display, f"modellint failed on this file: {type(exc).__name__}: {exc}",
            1, 1))
        return result

    def diagnostics(self, linted: Linted, cell: int | None) -> list[types.Diagnostic]:
        """The diagnostics of a document, or of one cell of a notebook."""
        lines = noqa.python_lines(linted.source(cell))
        rules = linted.project.registry.rules
        return [self.diagnostic(finding, lines, rules.get(finding.code))
                for finding in linted.findings if getattr(finding, "cell", None) == cell]

    def diagnostic(self, finding: Finding, lines: list[str], rule) -> types.Diagnostic:
        start = (finding.line - 1, finding.column - 1)
        end = (finding.end_line - 1, finding.end_column - 1)
        if end <= start:
            # a point (a syntax error): the rest of its line, so that editors can show it
            line = lines[start[0]] if 0 <= start[0] < len(lines) else ""
            end = (start[0], max(len(line), start[1] + 1)) if start[1] < len(line) else start
        href = self.docs.uri(rule) if rule is not None else None
        data = {"code": finding.code, "line": finding.line, "column": finding.column}
        if finding.fix is not None:
            data["fix"] = finding.fix.applicability
        return types.Diagnostic(
            range=self.to_client(lines, start, end),
            message=finding.message,
            severity=SEVERITY[finding.severity],
            code=finding.code,
            code_description=types.CodeDescription(href=href) if href else None,
            source=NAME,
            data=data,
        )

    def to_client(self, lines: list[str], start: tuple[int, int],
                  end: tuple[int, int]) -> types.Range:
        """A range of the document whose lines are `lines`, from (line, column) pairs counted
        from 0 in code points, in the client's units (UTF-16 unless it chose otherwise)."""
        codec = self.workspace.position_codec

        def position(line: int, column: int) -> types.Position:
            text = lines[line] if 0 <= line < len(lines) else ""
            return types.Position(line=line, character=codec.client_num_units(text[:column]))

        return types.Range(start=position(*start), end=position(*end))

    # -- notebooks -------------------------------------------------------------------------

    def lint_notebook(self, notebook_uri: str) -> None:
        """Lint a notebook's code cells joined in order (`modellint check`'s notebook pass)
        and publish each cell's diagnostics to that cell."""
        from modellint.static import notebook as notebooks

        self.cancel(notebook_uri)
        document = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if document is None:
            return
        cells: dict[int, str] = {}
        sources: dict[int, str] = {}
        for number, cell in enumerate(document.cells, start=1):
            text = self.workspace.text_documents.get(cell.document)
            if (cell.kind != types.NotebookCellKind.Code or text is None
                    or text.language_id not in ("python", "")):
                continue
            cells[number] = cell.document
            sources[number] = text.source
        linted = None
        settings = self.settings(notebook_uri)
        if settings is None:
            self.linted.pop(notebook_uri, None)
        else:
            project, path, disabled = settings
            display = str(path)
            book = notebooks.from_cells(list(sources.items()), project.config.max_code_bytes)
            try:
                index = None
                if reads_project(project_codes(project.rules), [disabled]):
                    index = self.project_index(project, path)
                    index.add_notebook(display, book)
                found = Linter(project.rules, project.config.rule_options(),
                               index).lint_notebook(display, book, disabled)
                result, findings = found.result, found.findings
            except Exception as exc:  # noqa: BLE001 - one notebook must not stop the server
                result = self._failed_lint(notebook_uri, display, book.source, exc)
                findings = [dataclasses.replace(finding, cell=next(iter(cells), None))
                            for finding in result.findings]
            linted = self.linted[notebook_uri] = Linted(
                document.version, book.source, result, findings, project, display, disabled,
                book=book, cells=cells, sources=sources)
        for number, uri in cells.items():
            diagnostics = [] if linted is None else self.diagnostics(linted, number)
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

    # -- code actions ----------------------------------------------------------------------

    def current(self, uri: str) -> tuple[Linted, int | None] | None:
        """The lint of the document `uri` (or of the notebook that holds the cell `uri`, with
        the cell's number), brought up to date with its text."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            linted = self.linted.get(notebook.uri)
            if (linted is None or linted.version != notebook.version
                    or uri not in linted.cells.values()):
                self.lint_notebook(notebook.uri)
                linted = self.linted.get(notebook.uri)
            if linted is None:
                return None
            number = next((n for n, each in linted.cells.items() if each == uri), None)
            return None if number is None else (linted, number)
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return None
        linted = self.linted.get(uri)
        if linted is None or linted.version != document.version or linted.text != document.source:
            self.cancel(uri)
            linted = self.lint_text(uri, document.source, document.version)
        return None if linted is None else (linted, None)

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        found = self.current(uri)
        if found is None:
            return []
        linted, cell = found
        only = params.context.only
        lines = noqa.python_lines(linted.source(cell))
        first, last = params.range.start.line, params.range.end.line
        rules = linted.project.registry.rules
        actions: list[types.CodeAction] = []
        quick = _wanted(types.CodeActionKind.QuickFix.value, only)
        silenced: set[tuple[str, int]] = set()
        for finding in linted.findings:
            if getattr(finding, "cell", None) != cell:
                continue
            if not (finding.line - 1 <= last and first <= finding.end_line - 1):
                continue
            diagnostic = self.diagnostic(finding, lines, rules.get(finding.code))
            if quick and finding.fix is not None:
                action = self.fix_action(uri, linted, finding, diagnostic)
                if action is not None:
                    actions.append(action)
            if (quick and finding.code not in (SYNTAX_ERROR[0], INTERNAL_ERROR[0])
                    and (finding.code, finding.line) not in silenced):
                # one comment silences every finding of the code on the line
                silenced.add((finding.code, finding.line))
                actions.append(self.noqa_action(uri, linted, finding, cell, diagnostic))
        if (_wanted(FIX_ALL_KIND, only) and linted.result.module is not None
                and any(applicable(f, False) for f in linted.findings)):
            action = types.CodeAction(
                title="modellint: fix all safe fixes", kind=FIX_ALL_KIND,
                data={"uri": uri, "version": linted.version})
            if not self.resolves_edits():  # the edit now, else on codeAction/resolve
                action.edit = self.fix_all_edit(uri, linted)
            if action.edit is not None or self.resolves_edits():
                actions.append(action)
        return actions

    def hover(self, params: types.HoverParams) -> types.Hover | None:
        """The documentation of the rules whose findings are under the cursor."""
        from modellint.report.sarif import help_markdown

        found = self.current(params.text_document.uri)
        if found is None:
            return None
        linted, cell = found
        lines = noqa.python_lines(linted.source(cell))
        line = params.position.line
        text = lines[line] if 0 <= line < len(lines) else ""
        # the cursor's column in code points
        column = self.workspace.position_codec.position_from_client_units(
            [text], types.Position(line=0, character=params.position.character)).character
        rules = linted.project.registry.rules
        shown: list[str] = []
        for finding in linted.findings:
            if getattr(finding, "cell", None) != cell or finding.code in shown:
                continue
            start = (finding.line - 1, finding.column - 1)
            end = (finding.end_line - 1, max(finding.end_column - 1, finding.column))
            if start <= (line, column) <= end and finding.code in rules:
                shown.append(finding.code)
        if not shown:
            return None
        return types.Hover(contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown,
            value="\n\n---\n\n".join(help_markdown(rules[code]) for code in shown)))

    def resolves_edits(self) -> bool:
        document = self.client_capabilities.text_document
        action = document.code_action if document else None
        support = action.resolve_support if action else None
        return bool(support and "edit" in support.properties)

    def resolve(self, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        uri = data.get("uri")
        if action.kind == FIX_ALL_KIND and isinstance(uri, str) and action.edit is None:
            found = self.current(uri)
            if found is not None:
                action.edit = self.fix_all_edit(uri, found[0])
        return action

    def fix_all_edit(self, uri: str, linted: Linted) -> types.WorkspaceEdit | None:
        if linted.result.module is None:
            return None
        project = linted.project
        data = _encode(linted.text) if linted.book is None else linted.text.encode("utf-8")
        linter = Linter(project.rules, project.config.rule_options(),
                        project.index if linted.book is None else None)
        fixing = fix_rounds(PythonText(linter, linted.display, data, linted.disabled),
                            linted.result, False)
        for message in fixing.messages:
            self.tell(message, warning=True)
        if fixing.messages or fixing.text == linted.result.source:
            return None
        return self.edit_to(uri, linted, fixing.text)

    def fix_action(self, uri: str, linted: Linted, finding: Finding,
                   diagnostic: types.Diagnostic) -> types.CodeAction | None:
        module, source, fix = linted.result.module, linted.result.source, finding.fix
        if fix is not None and fix.edits:
            return self.text_fix_action(uri, linted, finding, diagnostic)
        if module is None or source is None or fix is None:
            return None
        try:
            text, fixed = apply_fixes_deeply(module, [finding], True, source)
        except Exception as exc:  # noqa: BLE001 - a rule built a fix LibCST cannot apply
            log.error("fix of %s failed: %s", finding.code, exc)
            return None
        if not fixed or text == linted.result.source or check_parses(text) is not None:
            return None
        edit = self.edit_to(uri, linted, text)
        if edit is None:
            return None
        safe = fix.safe
        title = f"modellint: {fix.description} ({finding.code})"
        if not safe:
            title = f"modellint: {fix.description} ({finding.code}, unsafe fix)"
        return types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix,
                                diagnostics=[diagnostic], edit=edit, is_preferred=safe)

    def text_fix_action(self, uri: str, linted: Linted, finding: Finding,
                        diagnostic: types.Diagnostic) -> types.CodeAction | None:
        """The quick fix of a statement that does not parse (ML000's `async=`): an edit of
        the text of the document, or of its cell, whose lines the finding's are."""
        assert finding.fix is not None and finding.fix.edits
        cell = getattr(finding, "cell", None)
        target = uri if cell is None else linted.cells.get(cell)
        if target is None or (cell is not None and cell not in linted.sources):
            return None
        old = linted.source(cell)
        new, fixed = apply_text_fixes(old, [finding], True)
        if not fixed or new == old:
            return None
        edit = self.workspace_edit({target: [self.text_edit(old, new)]},
                                   linted.version if cell is None else None)
        return types.CodeAction(
            title=f"modellint: {finding.fix.description} ({finding.code})",
            kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic], edit=edit,
            is_preferred=finding.fix.safe)

    def noqa_action(self, uri: str, linted: Linted, finding: Finding, cell: int | None,
                    diagnostic: types.Diagnostic) -> types.CodeAction:
        source = linted.source(cell)
        lines = noqa.python_lines(source)
        number = finding.line - 1
        line = lines[number] if 0 <= number < len(lines) else ""
        # a noqa inside a string on the line is text, not a comment to extend
        comment = noqa.comments(source).get(number + 1) if "noqa" in line else None
        start, end, insert = noqa.noqa_insertion(line, comment, [finding.code])
        edit = types.TextEdit(range=self.to_client(lines, (number, start), (number, end)),
                              new_text=insert)
        return types.CodeAction(
            title=f"modellint: add `# noqa: {finding.code}` to line {number + 1}",
            kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic],
            edit=self.workspace_edit({uri: [edit]}, linted.version if cell is None else None))

    def edit_to(self, uri: str, linted: Linted, new: str) -> types.WorkspaceEdit | None:
        """The edit that turns what was linted into `new`: one replacement of what differs in
        a document; in a notebook, one in each cell that changed (None when the change cannot
        be put back into the cells)."""
        if linted.book is None:
            if linted.result.source is None:  # nothing was parsed: nothing to edit
                return None
            return self.workspace_edit(
                {uri: [self.text_edit(linted.result.source, new)]}, linted.version)
        sources = linted.book.cell_sources(new)
        if sources is None:
            return None
        changes = {linted.cells[number]: [self.text_edit(linted.sources[number], source)]
                   for number, source in sources.items()
                   if number in linted.cells and source != linted.sources[number]}
        return self.workspace_edit(changes, None) if changes else None

    def text_edit(self, old: str, new: str) -> types.TextEdit:
        start, old_end, new_end = _difference(old, new)
        lines = noqa.python_lines(old)
        return types.TextEdit(
            range=self.to_client(lines, _position(old, start), _position(old, old_end)),
            new_text=new[start:new_end])

    def workspace_edit(self, changes: dict[str, list[types.TextEdit]],
                       version: int | None) -> types.WorkspaceEdit:
        if version is not None and len(changes) == 1:
            [(uri, edits)] = changes.items()
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=uri, version=version),
                edits=edits)])
        return types.WorkspaceEdit(changes=changes)


def _encode(text: str) -> bytes:
    """The bytes a file holding `text` would have: in the encoding its coding cookie names."""
    data = text.encode("utf-8", "surrogatepass")
    head = data[:400]
    if b"coding" in head and any(_COOKIE.match(line) for line in head.splitlines()[:2]):
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            if encoding not in ("utf-8", "utf-8-sig"):
                return text.encode(encoding)
        except (SyntaxError, LookupError, UnicodeEncodeError):
            pass
    return data


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether a client that asked for the kinds `only` wants an action of `kind`."""
    return not only or any(kind == each or kind.startswith(f"{each}.") for each in only)


def _difference(old: str, new: str) -> tuple[int, int, int]:
    """(start, end in old, end in new) of the one span where `old` and `new` differ."""
    limit = min(len(old), len(new))
    start = 0
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    return start, len(old) - end, len(new) - end


_LINE_END = re.compile(r"\r\n|\r|\n")


def _position(text: str, offset: int) -> tuple[int, int]:
    """(line, column), both from 0, of character `offset` of `text`."""
    line, start = 0, 0
    for match in _LINE_END.finditer(text, 0, offset):
        if match.end() > offset:  # in the middle of a \r\n
            break
        line, start = line + 1, match.end()
    return line, offset - start


def build(plugins: list[str], allow_config_plugins: bool) -> ModellintServer:
    server = ModellintServer(plugins, allow_config_plugins)

    @server.feature(types.INITIALIZED)
    def initialized(ls: ModellintServer, params: types.InitializedParams) -> None:
        workspace = ls.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace else None
        if watched and watched.dynamic_registration:
            ls.client_register_capability(types.RegistrationParams(registrations=[
                types.Registration(
                    id=f"{NAME}-config", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=types.DidChangeWatchedFilesRegistrationOptions(
                        watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                                  types.FileSystemWatcher(glob_pattern="**/*.py")]),
                )]))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ModellintServer, params: types.DidOpenTextDocumentParams) -> None:
        if _is_config(params.text_document.uri):
            return
        ls.lint_now(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ModellintServer, params: types.DidChangeTextDocumentParams) -> None:
        if not _is_config(params.text_document.uri):
            ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: ModellintServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if _is_config(uri):
            ls.forget_settings()
            return
        document = ls.workspace.text_documents.get(uri)
        linted = ls.linted.get(uri)
        if (uri in ls.pending or linted is None or document is None
                or linted.version != document.version or linted.text != document.source):
            ls.lint_now(uri)  # else the diagnostics shown are those of this text already

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ModellintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.cancel(uri)
        # the index holds the closed document's last text: its file's is read again
        ls.forget_index()
        if ls.linted.pop(uri, None) is not None:
            ls.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: ModellintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.lint_notebook(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: ModellintServer,
                        params: types.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls: ModellintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.lint_now(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: ModellintServer,
                       params: types.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        ls.cancel(uri)
        ls.linted.pop(uri, None)
        for cell in params.cell_text_documents:
            ls.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: ModellintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(_is_config(change.uri) for change in params.changes):
            ls.forget_settings()
        elif any(change.uri not in ls.workspace.text_documents for change in params.changes):
            # a file changed outside the editor (a checkout, a generator): what the open
            # documents are linted against changed too (an open document's own save changes
            # nothing: the index holds its text already)
            ls.forget_index()
            ls.lint_open_documents()

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True))
    def code_action(ls: ModellintServer, params: types.CodeActionParams):
        return ls.code_actions(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: ModellintServer, params: types.HoverParams) -> types.Hover | None:
        return ls.hover(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    def code_action_resolve(ls: ModellintServer, action: types.CodeAction) -> types.CodeAction:
        return ls.resolve(action)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: ModellintServer, params: None) -> None:
        ls.shut_down = True
        for uri in list(ls.pending):
            ls.cancel(uri)
        ls.docs.remove()

    return server


def _is_config(uri: str) -> bool:
    return uri.rstrip("/").endswith("/pyproject.toml")


def serve(plugins: list[str], allow_config_plugins: bool) -> int:
    """Run the server on stdin and stdout until the client says `exit`: 0 after a `shutdown`,
    1 without one (as the protocol asks)."""
    logging.basicConfig(level=logging.WARNING, format="modellint server: %(message)s")
    server = build(plugins, allow_config_plugins)
    server.start_io()
    server.docs.remove()
    return 0 if server.shut_down else 1
