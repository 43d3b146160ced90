-- CAKE for Neovim 0.11+: the .cake filetype, the `cake lsp` language server, highlighting
-- and a :Cake command for the server's compiler commands.
--
-- Copy this file to ~/.config/nvim/plugin/cake.lua (Neovim sources it at start-up), or
-- `dofile()` it from init.lua. Change the server command or settings afterwards with
-- vim.lsp.config('cake', { ... }); see README.md beside this file.

if vim.fn.has('nvim-0.11') == 0 then
  vim.notify('cake.lua needs Neovim 0.11 or newer', vim.log.levels.WARN)
  return
end

vim.filetype.add({ extension = { cake = 'cake' } })

vim.lsp.config('cake', {
  -- `cake` from the environment CAKE is installed in. With only a Python interpreter:
  -- { '/path/to/venv/bin/python', '-m', 'cake', 'lsp' }
  cmd = { 'cake', 'lsp' },
  filetypes = { 'cake' },
  root_markers = { 'pyproject.toml', '.git' },
  -- Answered to the server's workspace/configuration requests (section "cake").
  settings = {
    cake = {
      arch = vim.NIL, -- e.g. 'sm_90a': check every kernel for this arch instead of its own
      plugins = { disabled = {} }, -- verifier passes not to run: plugin, plugin:rule, rule or code
      simulateOnSave = false,
      nvccPath = vim.NIL, -- the nvcc lowered CUDA is compiled with; nil: the one on PATH
    },
  },
})
vim.lsp.enable('cake')

local group = vim.api.nvim_create_augroup('cake', { clear = true })

vim.api.nvim_create_autocmd('FileType', {
  group = group,
  pattern = 'cake',
  callback = function(args)
    local bo = vim.bo[args.buf]
    bo.commentstring = '# %s'
    bo.expandtab = true
    bo.shiftwidth = 4
    bo.softtabstop = 4
    -- CAKE is Python syntax: the Python tree-sitter parser when installed, else Vim's
    -- Python syntax. The server's semantic tokens add the CAKE-specific colours.
    if not pcall(vim.treesitter.start, args.buf, 'python') then
      bo.syntax = 'python'
    end
  end,
})

local commands = {
  check = 'cake.check',
  lower = 'cake.lower',
  cost = 'cake.cost',
  simulate = 'cake.simulate',
}

--- A scratch buffer in a split beside the current window.
local function show(lines, filetype, name)
  vim.cmd('vsplit')
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].filetype = filetype
  vim.bo[buf].modifiable = false
  pcall(vim.api.nvim_buf_set_name, buf, name)
end

local function text_of(result, keys)
  if type(result) == 'string' then
    return result
  end
  if type(result) == 'table' then
    for _, key in ipairs(keys) do
      if type(result[key]) == 'string' then
        return result[key]
      end
    end
  end
end

--- Shows what a server command answered: findings in the quickfix list, CUDA and reports
--- in a split.
local function present(name, result)
  if name == 'check' then
    local items = {}
    for _, d in ipairs(result.diagnostics or {}) do
      local start = d.range.start
      table.insert(items, {
        filename = d.path,
        lnum = start.line,
        col = (start.byte_column or start.column),
        type = (d.severity or 'error'):sub(1, 1):upper(),
        text = string.format('%s %s', d.code, d.message),
      })
    end
    vim.fn.setqflist({}, ' ', { title = 'cake check', items = items })
    vim.notify(string.format('CAKE: %d finding(s)', #items))
    if #items > 0 then
      vim.cmd('copen')
    end
  elseif name == 'lower' then
    local cuda = text_of(result, { 'cuda', 'source', 'text', 'code' })
    if not cuda then
      vim.notify('CAKE: cake.lower answered without CUDA source', vim.log.levels.ERROR)
      return
    end
    show(vim.split(cuda, '\n', { plain = true }), 'cuda', 'cake://lowered.cu')
  else
    local md = text_of(result, { 'markdown', 'report', 'text' })
    if md then
      show(vim.split(md, '\n', { plain = true }), 'markdown', 'cake://' .. name .. '.md')
    else
      show(vim.split(vim.inspect(result), '\n', { plain = true }), 'lua', 'cake://' .. name)
    end
  end
end

vim.api.nvim_create_user_command('Cake', function(opts)
  local name = opts.fargs[1]
  local command = commands[name]
  if not command then
    vim.notify('CAKE: unknown command ' .. tostring(name), vim.log.levels.ERROR)
    return
  end
  local buf = vim.api.nvim_get_current_buf()
  local client = vim.lsp.get_clients({ bufnr = buf, name = 'cake' })[1]
  if not client then
    vim.notify('CAKE: the language server is not attached to this buffer', vim.log.levels.ERROR)
    return
  end
  client:request('workspace/executeCommand', {
    command = command,
    arguments = { { uri = vim.uri_from_bufnr(buf) } },
  }, function(err, result)
    if err then
      vim.notify(string.format('CAKE: %s: %s', command, err.message), vim.log.levels.ERROR)
      return
    end
    present(name, result)
  end, buf)
end, {
  nargs = 1,
  complete = function()
    return vim.tbl_keys(commands)
  end,
  desc = 'Run a CAKE compiler command on this file: check, lower, cost, simulate',
})
