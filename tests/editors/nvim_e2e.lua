-- Driven by tests/editors/test_neovim.py: Neovim's own LSP client against `cake lsp`.
-- Opens a .cake file with a planted error, waits for the diagnostic, checks its code and
-- line, runs :Cake check, asks for code actions, applies the quick fix and waits for the
-- diagnostics to clear. Each step's findings go to the JSON file $CAKE_E2E_RESULT; the
-- exit status says whether every step finished.

local env = vim.env
local result = { steps = {} }

local function save()
  local f = assert(io.open(env.CAKE_E2E_RESULT, 'w'))
  f:write(vim.json.encode(result))
  f:close()
end

local function wait(what, ms, cond)
  if not vim.wait(ms, cond, 50) then
    error('timed out waiting for ' .. what)
  end
end

local function errors(buf)
  return vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR })
end

local function main()
  -- Whatever the server tells the user (a rejected setting, a plugin that failed).
  result.messages = {}
  vim.lsp.handlers['window/showMessage'] = function(_, params)
    table.insert(result.messages, params.message)
  end
  dofile(env.CAKE_E2E_REPO .. '/editors/nvim/cake.lua')
  vim.lsp.config('cake', { cmd = { env.CAKE_E2E_PYTHON, '-m', 'cake', 'lsp' } })

  vim.cmd.edit(vim.fn.fnameescape(env.CAKE_E2E_FILE))
  local buf = vim.api.nvim_get_current_buf()
  result.filetype = vim.bo[buf].filetype

  local client
  wait('the cake client to attach', 30000, function()
    client = vim.lsp.get_clients({ bufnr = buf, name = 'cake' })[1]
    return client ~= nil and client.initialized
  end)
  result.offset_encoding = client.offset_encoding
  result.pulls = client:supports_method('textDocument/diagnostic')
  table.insert(result.steps, 'attached')

  wait('diagnostics', 60000, function() return #errors(buf) > 0 end)
  local d = errors(buf)[1]
  result.diagnostic = {
    code = d.code, lnum = d.lnum, col = d.col, message = d.message, source = d.source,
    count = #errors(buf),
  }
  table.insert(result.steps, 'diagnostic')

  vim.cmd('Cake check')
  wait('the quickfix list of :Cake check', 30000, function() return #vim.fn.getqflist() > 0 end)
  local qf = vim.fn.getqflist()
  result.quickfix = { count = #qf, text = qf[1].text, lnum = qf[1].lnum, col = qf[1].col }
  vim.cmd('cclose')
  vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  table.insert(result.steps, 'check command')

  local lsp_diag = d.user_data and d.user_data.lsp
  local response = client:request_sync('textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = lsp_diag.range,
    context = { diagnostics = { lsp_diag }, only = { 'quickfix' } },
  }, 10000, buf)
  assert(response and not response.err, 'codeAction failed: ' .. vim.inspect(response))
  result.actions = {}
  for _, a in ipairs(response.result or {}) do
    table.insert(result.actions, { title = a.title, kind = a.kind, preferred = a.isPreferred == true })
  end
  table.insert(result.steps, 'code actions')

  -- Apply it the way a user does: cursor on the error, code_action with the preferred fix.
  vim.api.nvim_win_set_cursor(0, { d.lnum + 1, d.col })
  local before = vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1]
  vim.lsp.buf.code_action({
    apply = true,
    context = { only = { 'quickfix' } },
    filter = function(a) return a.isPreferred == true end,
  })
  wait('the quick fix to change the line', 10000, function()
    return vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1] ~= before
  end)
  result.fixed_line = vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1]
  table.insert(result.steps, 'fix applied')

  wait('the diagnostics to clear', 60000, function() return #errors(buf) == 0 end)
  table.insert(result.steps, 'cleared')
end

local ok, err = xpcall(main, debug.traceback)
if not ok then
  result.error = tostring(err)
end
save()
vim.cmd(ok and 'qall!' or 'cquit 1')
