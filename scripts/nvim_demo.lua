-- Drive `modellint server` from Neovim's built-in LSP client, headless, and print what the
-- editor shows for a file with mistakes: its diagnostics, the code actions on one line, the
-- line after applying the preferred one, and the diagnostics after that edit.
--
--   nvim --headless --clean -u NONE -c 'luafile scripts/nvim_demo.lua' [FILE [LINE]]
--
-- FILE defaults to fixtures/plain_list_mynet.py; MODELLINT_CMD overrides the server command
-- (default: `python -m modellint server` with the `python` on PATH). Works on Neovim 0.7+.
local args = vim.v.argv
local file, line = nil, nil
for i, a in ipairs(args) do
  if a == 'scripts/nvim_demo.lua' or a:match('nvim_demo%.lua$') then
    file, line = args[i + 1], tonumber(args[i + 2] or '')
  end
end
file = file or 'fixtures/plain_list_mynet.py'
local cmd = vim.env.MODELLINT_CMD and vim.split(vim.env.MODELLINT_CMD, ' ')
  or { 'python', '-m', 'modellint', 'server' }
local sev = { 'error', 'warning', 'info', 'hint' }
local function show(label)
  print(label)
  local diagnostics = vim.diagnostic.get(0)
  table.sort(diagnostics, function(a, b) return a.lnum * 1000 + a.col < b.lnum * 1000 + b.col end)
  for _, d in ipairs(diagnostics) do
    print(string.format('  %s:%d:%d %s %s: %s', file, d.lnum + 1, d.col + 1,
      d.code or (d.user_data and d.user_data.lsp.code) or '?', sev[d.severity], d.message))
  end
end
local id = vim.lsp.start_client({ name = 'modellint', cmd = cmd, root_dir = vim.fn.getcwd() })
vim.cmd('edit ' .. vim.fn.fnameescape(file))
vim.lsp.buf_attach_client(0, id)
vim.wait(20000, function() return #vim.diagnostic.get(0) > 0 end, 50)
show('diagnostics:')
-- the line of the first finding with a safe fix (the raw diagnostic's `data`), else the first
for _, d in ipairs(vim.diagnostic.get(0)) do
  local data = d.user_data and d.user_data.lsp and d.user_data.lsp.data
  if not line and data and data.fix == 'safe' then line = d.lnum + 1 end
end
local first = vim.diagnostic.get(0)[1]
line = line or (first and first.lnum + 1) or 1
vim.api.nvim_win_set_cursor(0, { line, 0 })
local params = vim.lsp.util.make_range_params()
params.context = { diagnostics = {} }
local chosen
print('code actions on line ' .. line .. ':')
for _, response in pairs(vim.lsp.buf_request_sync(0, 'textDocument/codeAction', params, 10000) or {}) do
  for _, action in ipairs(response.result or {}) do
    print('  ' .. action.title .. (action.isPreferred and '  [preferred]' or ''))
    if action.isPreferred and action.edit and not chosen then chosen = action end
  end
end
if chosen then
  local before = #vim.diagnostic.get(0)
  vim.lsp.util.apply_workspace_edit(chosen.edit, 'utf-16')
  print('applied: ' .. chosen.title)
  print('line ' .. line .. ' is now: ' .. vim.api.nvim_buf_get_lines(0, line - 1, line, false)[1])
  vim.wait(5000, function() return #vim.diagnostic.get(0) < before end, 50)
  show('diagnostics after the edit:')
end
vim.lsp.stop_client(id)
vim.wait(5000, function() return vim.lsp.get_client_by_id(id) == nil end, 50)
print('server stopped: ' .. tostring(vim.lsp.get_client_by_id(id) == nil) .. '\n')
vim.cmd('qa!')
