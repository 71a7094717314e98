"""`modellint server` end to end: pygls's own LSP client drives the real server process
(`python -m modellint server`) over stdio, one process for the module."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

TIMEOUT = 30

MISTAKES = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint


    def f(x, block):
        y = checkpoint(block, x)
        return F.sigmoid(y) + F.tanh(y)
""")


class Session:
    """A server process and a client on an event loop of the test's own."""

    def __init__(self, cwd: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = LanguageClient("modellint-tests", "1")
        self.published: dict[str, list[types.PublishDiagnosticsParams]] = {}
        self.messages: list[str] = []
        self.stderr = bytearray()

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append(params)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def message(params: types.ShowMessageParams) -> None:
            self.messages.append(params.message)

        @self.client.feature(types.CLIENT_REGISTER_CAPABILITY)
        def register(params: types.RegistrationParams) -> None:
            self.registrations = params.registrations

        self.registrations: list[types.Registration] = []
        # the person running the tests may have opted in to config plugins: these tests do not
        environ = {k: v for k, v in os.environ.items() if k != "MODELLINT_ALLOW_CONFIG_PLUGINS"}
        environ.update(env or {})
        self.run(self.client.start_io(sys.executable, "-X", "importtime", "-m", "modellint",
                                      "server", *extra, cwd=str(cwd), env=environ))
        self.drain = self.loop.create_task(self._drain())
        capabilities = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(
                did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(
                    dynamic_registration=True)),
            text_document=types.TextDocumentClientCapabilities(
                code_action=types.CodeActionClientCapabilities(
                    resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]))),
        )
        self.initialized = self.run(self.client.initialize_async(types.InitializeParams(
            capabilities=capabilities, root_uri=cwd.as_uri(), process_id=os.getpid())))
        self.client.initialized(types.InitializedParams())

    async def _drain(self) -> None:
        # the client pipes the server's stderr but never reads it: read it, or a full pipe
        # would stall the server
        stream = self.client._server.stderr
        while chunk := await stream.read(65536):
            self.stderr.extend(chunk)

    def run(self, awaitable):
        return self.loop.run_until_complete(asyncio.wait_for(awaitable, TIMEOUT))

    def count(self, uri: str) -> int:
        return len(self.published.get(uri, []))

    def wait(self, uri: str, after: int) -> list[types.Diagnostic]:
        """The diagnostics of the first publication for `uri` after the `after`-th."""
        async def until() -> None:
            while self.count(uri) <= after:
                await asyncio.sleep(0.01)

        self.run(until())
        return self.published[uri][after].diagnostics

    def open(self, path: Path, text: str, language: str = "python") -> list[types.Diagnostic]:
        path.write_text(text, encoding="utf-8")
        uri = path.as_uri()
        before = self.count(uri)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1,
                                                 text=text)))
        return self.wait(uri, before)

    def replace(self, path: Path, text: str, version: int) -> list[types.Diagnostic]:
        uri = path.as_uri()
        before = self.count(uri)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        return self.wait(uri, before)

    def actions(self, uri: str, line: int, only=None) -> list[types.CodeAction]:
        return self.run(self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=line, character=0),
                              end=types.Position(line=line, character=0)),
            context=types.CodeActionContext(diagnostics=[], only=only)))) or []

    def close(self) -> int | None:
        if self.client._server.returncode is None:
            try:
                self.run(self.client.shutdown_async(None))
                self.client.exit(None)
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.run(self.client._server.wait())
        code = self.client._server.returncode
        self.run(self.client.stop())
        self.run(self.drain)
        self.loop.close()
        return code


def apply(text: str, edit: types.WorkspaceEdit, uri: str) -> str:
    """`text` with the edits of `edit` for `uri` applied, as an editor would."""
    if edit.document_changes:
        edits = [e for change in edit.document_changes if change.text_document.uri == uri
                 for e in change.edits]
    else:
        edits = list(edit.changes[uri])
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:  # ASCII text: UTF-16 units are characters
        return starts[position.line] + position.character

    for change in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[:offset(change.range.start)] + change.new_text + text[offset(change.range.end):]
    return text


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("project")


@pytest.fixture(scope="module")
def session(project: Path):
    session = Session(project)
    yield session
    session.close()


def codes(diagnostics) -> list[str]:
    return sorted(d.code for d in diagnostics)


def test_diagnostics_on_open_have_code_severity_and_a_link_to_the_rule(session, project):
    diagnostics = session.open(project / "model.py", MISTAKES)
    assert codes(diagnostics) == ["ML903", "ML903", "ML907"]
    sigmoid = next(d for d in diagnostics if "sigmoid" in d.message)
    # line 8, column 12 in `check`'s terms: 0-based in the protocol's
    assert sigmoid.range == types.Range(start=types.Position(line=7, character=11),
                                        end=types.Position(line=7, character=20))
    assert sigmoid.severity == types.DiagnosticSeverity.Information
    assert sigmoid.source == "modellint"
    checkpoint = next(d for d in diagnostics if d.code == "ML907")
    assert checkpoint.severity == types.DiagnosticSeverity.Warning
    href = sigmoid.code_description.href
    assert href.startswith("file://")
    doc = Path(unquote(urlparse(href).path)).read_text(encoding="utf-8")
    assert doc.startswith("# ML903 deprecated-functional")
    assert "What it does" in doc


def test_a_change_is_linted_again(session, project):
    path = project / "changing.py"
    assert codes(session.open(path, MISTAKES)) == ["ML903", "ML903", "ML907"]
    fixed = MISTAKES.replace("F.sigmoid(y) + F.tanh(y)", "torch.sigmoid(y)")
    assert codes(session.replace(path, fixed, 2)) == ["ML907"]


def test_safe_fix_code_action_applied_to_the_text(session, project):
    path = project / "fixme.py"
    session.open(path, MISTAKES)
    actions = session.actions(path.as_uri(), 7)
    titles = [a.title for a in actions]
    fixes = [a for a in actions if a.edit is not None and "noqa" not in a.title]
    assert len(fixes) == 2, titles
    assert all(a.is_preferred and "unsafe" not in a.title for a in fixes)
    sigmoid = next(a for a in fixes if "sigmoid" in a.title)
    assert sigmoid.kind == types.CodeActionKind.QuickFix
    assert sigmoid.diagnostics[0].code == "ML903"
    new = apply(MISTAKES, sigmoid.edit, path.as_uri())
    assert new == MISTAKES.replace("F.sigmoid(y)", "torch.sigmoid(y)")
    assert codes(session.replace(path, new, 2)) == ["ML903", "ML907"]


def test_unsafe_fix_is_marked_and_not_preferred(session, project):
    path = project / "unsafe.py"
    session.open(path, MISTAKES)
    actions = session.actions(path.as_uri(), 6)
    unsafe = [a for a in actions if "ML907" in a.title and "noqa" not in a.title]
    assert len(unsafe) == 1
    assert "unsafe" in unsafe[0].title and not unsafe[0].is_preferred
    new = apply(MISTAKES, unsafe[0].edit, path.as_uri())
    assert "use_reentrant=False" in new.splitlines()[6]


def test_noqa_code_action_silences_the_finding(session, project):
    path = project / "noqa.py"
    session.open(path, MISTAKES)
    noqa = [a for a in session.actions(path.as_uri(), 6) if "noqa" in a.title]
    assert [a.title for a in noqa] == ["modellint: add `# noqa: ML907` to line 7"]
    new = apply(MISTAKES, noqa[0].edit, path.as_uri())
    assert new.splitlines()[6] == "    y = checkpoint(block, x)  # noqa: ML907"
    assert codes(session.replace(path, new, 2)) == ["ML903", "ML903"]
    # one action for the two ML903 of line 8: one comment silences both
    second = [a for a in session.actions(path.as_uri(), 7) if "noqa" in a.title]
    assert [a.title for a in second] == ["modellint: add `# noqa: ML903` to line 8"]
    newer = apply(new, second[0].edit, path.as_uri())
    assert codes(session.replace(path, newer, 3)) == []
    # a code joins a noqa comment that is there
    other = MISTAKES.replace("checkpoint(block, x)", "checkpoint(block, x)  # noqa: ML903")
    assert codes(session.replace(path, other, 4)) == ["ML903", "ML903", "ML907"]
    third = [a for a in session.actions(path.as_uri(), 6) if "noqa" in a.title]
    assert apply(other, third[0].edit, path.as_uri()).splitlines()[6] == (
        "    y = checkpoint(block, x)  # noqa: ML903, ML907")


def test_noqa_code_action_never_edits_a_noqa_inside_a_string(session, project):
    path = project / "noqa_string.py"
    text = MISTAKES.replace("checkpoint(block, x)", "checkpoint(block, x, '# noqa: ML903')")
    assert codes(session.open(path, text)) == ["ML903", "ML903", "ML907"]
    noqa = [a for a in session.actions(path.as_uri(), 6) if "noqa" in a.title]
    new = apply(text, noqa[0].edit, path.as_uri())
    assert new.splitlines()[6] == "    y = checkpoint(block, x, '# noqa: ML903')  # noqa: ML907"
    assert codes(session.replace(path, new, 2)) == ["ML903", "ML903"]


def test_fix_all_safe_is_a_source_action_resolved_on_demand(session, project):
    path = project / "fixall.py"
    session.open(path, MISTAKES)
    actions = session.actions(path.as_uri(), 0, only=[types.CodeActionKind.SourceFixAll])
    assert [a.kind for a in actions] == ["source.fixAll.modellint"]
    assert actions[0].edit is None  # this client resolves edits
    resolved = session.run(session.client.code_action_resolve_async(actions[0]))
    new = apply(MISTAKES, resolved.edit, path.as_uri())
    assert "F.sigmoid" not in new and "F.tanh" not in new
    assert "torch.sigmoid(y) + torch.tanh(y)" in new
    # the unsafe fix is not part of it
    assert codes(session.replace(path, new, 2)) == ["ML907"]
    assert session.actions(path.as_uri(), 0, only=[types.CodeActionKind.SourceFixAll]) == []


def test_a_file_that_does_not_parse_is_ml000_and_the_server_goes_on(session, project):
    path = project / "broken.py"
    diagnostics = session.open(path, "def f(:\n    return 1\n")
    assert codes(diagnostics) == ["ML000"]
    assert diagnostics[0].severity == types.DiagnosticSeverity.Error
    assert "SyntaxError" in diagnostics[0].message
    assert diagnostics[0].range.start.line == 0
    assert session.actions(path.as_uri(), 0) == []  # nothing to fix, no noqa for ML000
    # the same server still lints
    assert codes(session.replace(path, "import torch.nn.functional as F\nF.tanh(1)\n", 2)) == [
        "ML903"]
    nul = session.open(project / "nul.py", "x = 1\x00\n")
    assert codes(nul) == ["ML000"]


def test_a_statement_that_does_not_parse_has_its_quick_fix_and_the_rest_is_linted(
        session, project):
    path = project / "old.py"
    text = ("import torch.nn.functional as F\n"
            "x = torch.ones(2).cuda(async=True)\n"
            "y = F.tanh(x)\n")
    diagnostics = session.open(path, text)
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("ML000", 1), ("ML903", 2)]
    actions = session.actions(path.as_uri(), 1)
    assert [a.title for a in actions] == [
        "modellint: rename `async=` to `non_blocking=` (its name since PyTorch 0.4) (ML000)"]
    new = apply(text, actions[0].edit, path.as_uri())
    assert new == text.replace("async=", "non_blocking=")
    assert codes(session.replace(path, new, 2)) == ["ML903"]


def test_config_is_read_again_when_pyproject_changes(session, project):
    path = project / "configured.py"
    assert codes(session.open(path, MISTAKES)) == ["ML903", "ML903", "ML907"]
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.modellint]\nignore = ["ML903"]\n', encoding="utf-8")
    assert any(r.method == "workspace/didChangeWatchedFiles" for r in session.registrations)
    before = session.count(path.as_uri())
    session.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Created)]))
    assert codes(session.wait(path.as_uri(), before)) == ["ML907"]
    # a config with a mistake is shown to the user, and no stale findings stay
    pyproject.write_text('[tool.modellint]\nignore = ["ML9x"]\n', encoding="utf-8")
    before = session.count(path.as_uri())
    session.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)]))
    assert list(session.wait(path.as_uri(), before)) == []
    assert any("unknown rule code `ML9x`" in m for m in session.messages)
    pyproject.unlink()
    before = session.count(path.as_uri())
    session.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Deleted)]))
    assert codes(session.wait(path.as_uri(), before)) == ["ML903", "ML903", "ML907"]


def test_notebook_cells_are_linted_in_order_with_diagnostics_per_cell(session, project):
    notebook = (project / "train.ipynb").as_uri()
    cells = [
        ("import torch\n%matplotlib inline\nimport torch.nn.functional as F\n",
         types.NotebookCellKind.Code),
        ("# Training\n", types.NotebookCellKind.Markup),
        ("x = 1\ny = F.tanh(x)\n", types.NotebookCellKind.Code),
    ]
    uris = [f"{notebook}#cell{i}" for i in range(len(cells))]
    before = session.count(uris[2])
    session.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=notebook, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=kind, document=uri)
                   for (_, kind), uri in zip(cells, uris, strict=True)]),
        cell_text_documents=[
            types.TextDocumentItem(uri=uri, language_id="python" if kind == 2 else "markdown",
                                   version=1, text=text)
            for (text, kind), uri in zip(cells, uris, strict=True)]))
    diagnostics = session.wait(uris[2], before)
    assert codes(diagnostics) == ["ML903"]
    # the second line of the third cell, although the import is in the first
    assert diagnostics[0].range.start == types.Position(line=1, character=4)
    assert list(session.published[uris[0]][-1].diagnostics) == []
    assert uris[1] not in session.published  # a markdown cell is not Python
    fix = [a for a in session.actions(uris[2], 1) if "noqa" not in a.title]
    assert fix and apply(cells[2][0], fix[0].edit, uris[2]) == "x = 1\ny = torch.tanh(x)\n"


def test_the_server_never_imports_torch(session, project):
    session.open(project / "imports_torch.py", "import torch\nimport torchvision\n" + MISTAKES)
    imported = session.stderr.decode("utf-8", "replace")
    # -X importtime names every module the server imported: the linter's, and no torch
    modules = {line.rpartition("|")[2].strip() for line in imported.splitlines()
               if line.startswith("import time:")}
    assert {"libcst", "modellint.static.engine", "pygls"} <= modules
    assert not {name for name in modules if name.split(".")[0] in ("torch", "torchvision")}


def test_config_plugins_need_the_same_opt_in_as_check(tmp_path):
    import shutil

    plugin_root = Path(__file__).parent / "plugin_example"
    shutil.copytree(plugin_root / "modellint_example", tmp_path / "modellint_example")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.modellint]\nplugins = ["modellint_example.rules"]\n', encoding="utf-8")
    printing = ("import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
                "    def forward(self, x):\n        print(x.shape)\n        return x\n")
    refused = Session(tmp_path)
    try:
        assert codes(refused.open(tmp_path / "a.py", printing)) == []
        assert any("not loading plugin 'modellint_example.rules'" in m
                   and "--allow-config-plugins" in m for m in refused.messages)
    finally:
        refused.close()
    allowed = Session(tmp_path, "--allow-config-plugins")
    try:
        assert codes(allowed.open(tmp_path / "a.py", printing)) == ["XMP101"]
        assert not allowed.messages
    finally:
        allowed.close()


def test_shutdown_then_exit_ends_the_process_cleanly(tmp_path):
    session = Session(tmp_path)
    session.open(tmp_path / "a.py", "def f(:\n")
    assert session.run(session.client.shutdown_async(None)) is None
    session.client.exit(None)
    assert session.close() == 0
    assert "Traceback" not in session.stderr.decode("utf-8", "replace")


def test_columns_are_utf16_code_units(session, project):
    # the protocol's default position encoding: 😀 is two UTF-16 units, é one; `F` is code
    # point 14 (from 0) of its line, UTF-16 unit 15
    text = 'import torch\nimport torch.nn.functional as F\ns = "é😀"; y = F.tanh(s)\n'
    diagnostics = session.open(project / "unicode.py", text)
    assert codes(diagnostics) == ["ML903"]
    assert diagnostics[0].range == types.Range(start=types.Position(line=2, character=15),
                                               end=types.Position(line=2, character=21))


def test_changes_in_quick_succession_are_linted_once(session, project):
    path = project / "typing.py"
    session.open(path, MISTAKES)
    uri = path.as_uri()
    before = session.count(uri)
    text = MISTAKES
    for version in range(2, 7):
        text = text.replace("F.", "torch.", 1)
        session.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    session.wait(uri, before)
    session.run(asyncio.sleep(1))
    # one lint for the five edits (two at most if the machine stalled between them)
    assert session.count(uri) - before <= 2
    assert session.published[uri][-1].version == 6
    assert codes(session.published[uri][-1].diagnostics) == ["ML907"]
    # a save with nothing new to lint publishes nothing more
    session.client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    count = session.count(uri)
    session.run(asyncio.sleep(0.5))
    assert session.count(uri) == count


def test_exit_without_shutdown_is_status_1(tmp_path):
    session = Session(tmp_path)
    session.client.exit(None)
    session.run(session.client._server.wait())
    assert session.close() == 1


def open_notebook(session: Session, path: Path, cells: list[tuple[str, int]]) -> list[str]:
    """Open a notebook of `cells` (source, kind): the URIs of its cells."""
    notebook = path.as_uri()
    uris = [f"{notebook}#cell{i}" for i in range(len(cells))]
    session.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=notebook, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=kind, document=uri)
                   for (_, kind), uri in zip(cells, uris, strict=True)]),
        cell_text_documents=[
            types.TextDocumentItem(uri=uri, language_id="python" if kind == 2 else "markdown",
                                   version=1, text=text)
            for (text, kind), uri in zip(cells, uris, strict=True)]))
    return uris


def test_notebook_cell_that_does_not_parse_and_fixes_across_cells(session, project):
    code = types.NotebookCellKind.Code
    cells = [
        ("%%time\nimport torch\nimport torch.nn.functional as F\n", code),
        ("def f(:\n", code),
        ("a = F.tanh(torch.ones(1))", code),  # Jupyter leaves the last line unended
        ("!pip install torch\nb = F.sigmoid(a)  # keep\n", code),
    ]
    path = project / "fixes.ipynb"
    before = {i: session.count(f"{path.as_uri()}#cell{i}") for i in range(4)}
    uris = open_notebook(session, path, cells)
    broken = session.wait(uris[1], before[1])
    assert codes(broken) == ["ML000"] and "SyntaxError" in broken[0].message
    assert codes(session.wait(uris[2], before[2])) == ["ML903"]
    assert codes(session.wait(uris[3], before[3])) == ["ML903"]
    assert list(session.wait(uris[0], before[0])) == []
    # noqa in a cell
    noqa = [a for a in session.actions(uris[3], 1) if "noqa" in a.title]
    assert [a.title for a in noqa] == ["modellint: add `# noqa: ML903` to line 2"]
    assert apply(cells[3][0], noqa[0].edit, uris[3]) == (
        "!pip install torch\nb = F.sigmoid(a)  # keep  # noqa: ML903\n")
    # fix all: one edit in each cell that changes; the magics stay as they were
    [fix_all] = session.actions(uris[2], 0, only=[types.CodeActionKind.SourceFixAll])
    edit = session.run(session.client.code_action_resolve_async(fix_all)).edit
    assert sorted(edit.changes) == [uris[2], uris[3]]
    assert apply(cells[2][0], edit, uris[2]) == "a = torch.tanh(torch.ones(1))"
    assert apply(cells[3][0], edit, uris[3]) == (
        "!pip install torch\nb = torch.sigmoid(a)  # keep\n")
    # a change to a cell is linted again (the notebook as a whole)
    notebook = path.as_uri()
    count = session.count(uris[3])
    session.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=notebook, version=2),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            text_content=[types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=uris[1], version=2),
                changes=[types.TextDocumentContentChangeWholeDocument(
                    text="def f():\n    return F.tanh(1)\n")])]))))
    assert codes(session.wait(uris[1], before[1] + 1)) == ["ML903"]
    assert codes(session.wait(uris[3], count)) == ["ML903"]


def test_notebook_cell_statement_that_does_not_parse_has_its_quick_fix(session, project):
    code = types.NotebookCellKind.Code
    cells = [("import torch\nimport torch.nn.functional as F\n", code),
             ("x = torch.ones(1).cuda(async=True)\ny = F.tanh(x)", code)]
    path = project / "old.ipynb"
    before = session.count(f"{path.as_uri()}#cell1")
    uris = open_notebook(session, path, cells)
    diagnostics = session.wait(uris[1], before)
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("ML000", 0), ("ML903", 1)]
    [fix] = [a for a in session.actions(uris[1], 0) if "non_blocking" in a.title]
    assert apply(cells[1][0], fix.edit, uris[1]) == (
        "x = torch.ones(1).cuda(non_blocking=True)\ny = F.tanh(x)")


def test_hover_on_a_finding_shows_the_rule_documentation(session, project):
    path = project / "hover.py"
    session.open(path, MISTAKES)

    def hover(line: int, character: int):
        return session.run(session.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=path.as_uri()),
            position=types.Position(line=line, character=character))))

    shown = hover(7, 13)  # inside `F.sigmoid`
    assert shown.contents.kind == types.MarkupKind.Markdown
    assert shown.contents.value.startswith("**ML903 deprecated-functional**")
    assert "What it does" in shown.contents.value and "```python" in shown.contents.value
    assert hover(0, 3) is None  # `import torch`: nothing there


def test_a_document_that_is_not_a_file_is_linted_too(session):
    uri = "untitled:Untitled-1"
    before = session.count(uri)
    session.client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                             text=MISTAKES)))
    assert codes(session.wait(uri, before)) == ["ML903", "ML903", "ML907"]


def test_a_coding_cookie_is_honoured(session, project):
    # the editor sends text; the engine reads bytes in the file's declared encoding, so that
    # columns after a non-ASCII character stay right
    text = ('# -*- coding: latin-1 -*-\nimport torch\nimport torch.nn.functional as F\n'
            's = "é"; y = F.tanh(s)\n')
    diagnostics = session.open(project / "latin.py", text)
    assert codes(diagnostics) == ["ML903"]
    assert diagnostics[0].range.start == types.Position(line=3, character=13)


def test_saving_pyproject_in_the_editor_rereads_the_config(tmp_path):
    # a client that cannot watch files: the save of pyproject.toml is the signal
    session = Session(tmp_path)
    try:
        path = tmp_path / "saved.py"
        assert codes(session.open(path, MISTAKES)) == ["ML903", "ML903", "ML907"]
        pyproject = tmp_path / "pyproject.toml"
        pyproject.write_text('[tool.modellint]\nignore = ["ML907"]\n', encoding="utf-8")
        before = session.count(path.as_uri())
        session.client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=pyproject.as_uri())))
        assert codes(session.wait(path.as_uri(), before)) == ["ML903", "ML903"]
    finally:
        session.close()


SOFTMAX_MODEL = """\
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(784, 10), nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(x)
"""
TRAIN = """\
import torch.nn.functional as F
from models import Classifier


def step(x, y):
    model = Classifier()
    return F.cross_entropy(model(x), y)
"""


def test_a_document_sees_the_projects_other_files_and_open_documents(tmp_path):
    """As `check` on one file: train.py knows that models.py's Classifier ends in a softmax
    (ML308), from disk, from an open document's unsaved text, and after a change on disk."""
    (tmp_path / "pyproject.toml").write_text("[tool.modellint]\n", encoding="utf-8")
    models = tmp_path / "models.py"
    models.write_text(SOFTMAX_MODEL, encoding="utf-8")
    session = Session(tmp_path, env={"MODELLINT_CACHE_DIR": str(tmp_path / "cache")})
    try:
        train = tmp_path / "train.py"
        assert [(d.code, d.range.start.line) for d in session.open(train, TRAIN)] == [
            ("ML308", 6)]
        # the model opened and edited, not saved: train.py is linted against the editor's text
        session.open(models, SOFTMAX_MODEL)
        session.replace(models, SOFTMAX_MODEL.replace(", nn.Softmax(dim=1))", ")"), 2)
        assert codes(session.replace(train, TRAIN + "\n", 2)) == []
        # closed without saving, then changed on disk by someone else: the disk is read again
        session.client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=models.as_uri())))
        assert codes(session.replace(train, TRAIN, 3)) == ["ML308"]
        models.write_text(SOFTMAX_MODEL.replace("nn.Softmax(dim=1)", "nn.ReLU()"),
                          encoding="utf-8")
        before = session.count(train.as_uri())
        session.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=models.as_uri(), type=types.FileChangeType.Changed)]))
        assert codes(session.wait(train.as_uri(), before)) == []
    finally:
        session.close()


def test_a_large_project_is_read_in_a_thread_then_the_documents_linted_again(tmp_path):
    """The server answers at once with what the document alone shows; once the project is
    read, the open documents are linted again with it."""
    from modellint.server import READ_PROJECT_IN_THREAD_FROM

    (tmp_path / "pyproject.toml").write_text("[tool.modellint]\n", encoding="utf-8")
    (tmp_path / "models.py").write_text(SOFTMAX_MODEL, encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    for number in range(READ_PROJECT_IN_THREAD_FROM + 1):
        (tmp_path / "pkg" / f"m{number}.py").write_text(f"x = {number}\n", encoding="utf-8")
    session = Session(tmp_path, env={"MODELLINT_CACHE_DIR": str(tmp_path / "cache")})
    try:
        train = tmp_path / "train.py"
        assert codes(session.open(train, TRAIN)) == []
        assert codes(session.wait(train.as_uri(), 1)) == ["ML308"]
    finally:
        session.close()


def test_a_notebook_sees_the_projects_files(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.modellint]\n", encoding="utf-8")
    (tmp_path / "models.py").write_text(SOFTMAX_MODEL, encoding="utf-8")
    session = Session(tmp_path, env={"MODELLINT_CACHE_DIR": str(tmp_path / "cache")})
    try:
        notebook = (tmp_path / "explore.ipynb").as_uri()
        cells = ["import torch.nn.functional as F\nfrom models import Classifier\n",
                 "def step(x, y):\n    model = Classifier()\n"
                 "    return F.cross_entropy(model(x), y)\n"]
        uris = [f"{notebook}#cell{i}" for i in range(len(cells))]
        session.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook, notebook_type="jupyter-notebook", version=1,
                cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=uri)
                       for uri in uris]),
            cell_text_documents=[types.TextDocumentItem(uri=uri, language_id="python",
                                                        version=1, text=text)
                                 for text, uri in zip(cells, uris, strict=True)]))
        diagnostics = session.wait(uris[1], 0)
        assert [(d.code, d.range.start.line) for d in diagnostics] == [("ML308", 2)]
    finally:
        session.close()
