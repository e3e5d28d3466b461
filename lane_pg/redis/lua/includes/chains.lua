-- Chains (sql/functions/19_chains.sql): jobs that run one after another. Each link's job
-- carries what comes after it, as the client checked and built it:
--   chain_next   JSON text: an array of the later links, each one JSON text
--                {tag, queue, spec} (spec as add.lua stores one, its options holding the
--                link's options.chain); strings inside, so passing the rest on re-encodes
--                no number of a payload
--   chain_catch  JSON text {tag, chain_id, callback, spec} of the catch job, when the chain
--                has one
--   queue        the link's own queue's name (the catch job's data names it)
-- lane_chain_advance runs in the script that completes a link (fenced by its token, so a
-- run that lost its lease adds nothing) and adds the next one, its delay counted from now;
-- lane_chain_broken runs in the one that fails it for good. A removed link ends its chain
-- quietly: nothing to do.
-- @include add
-- @include events

-- A JSON array of the strings items[from..].
local function lane_chain_rest(items, from)
  local parts = {}
  for i = from, #items do
    parts[#parts + 1] = cjson.encode(items[i])
  end
  return '[' .. table.concat(parts, ',') .. ']'
end

local function lane_chain_store(link, rest_text, catch_text, now)
  lane_ensure_queue(now)
  local job = lane_add_specs({link.spec}, now)[1]
  if job.chain_next == nil then  -- a new link: a repeated add finds it as it was
    local fields = {queue = link.queue, chain_next = rest_text}
    if catch_text ~= nil then
      fields.chain_catch = catch_text
    end
    lane_job_set(job, fields)
  end
  return job
end

-- lane._chain_add: the link `link_text` ({tag, queue, spec}) in its queue, id
-- <chain id>-<index> (in its spec), followed by `rest_text`.
local function lane_chain_add(link_text, rest_text, catch_text, now)
  local link = cjson.decode(link_text)
  return lane_in(link.tag, lane_chain_store, link, rest_text, catch_text, now)
end

-- lane._chain_advance for a link that just completed: the next link, if any.
local function lane_chain_advance(job, now)
  if job.chain_next == nil or job.chain_next == '[]' then
    return
  end
  local rest = cjson.decode(job.chain_next)
  lane_chain_add(rest[1], lane_chain_rest(rest, 2), job.chain_catch, now)
end

local function lane_chain_catch(spec, now)
  lane_ensure_queue(now)
  lane_add_specs({spec}, now)
end

-- lane._chain_broken for a link that failed for good: the chain's catch job, once (its id
-- chain-<chain id>-catch).
local function lane_chain_broken(job, now)
  if job.chain_catch == nil then
    return
  end
  local catch = cjson.decode(job.chain_catch)
  local spec = catch.spec
  spec.data = cjson.encode({chain_id = catch.chain_id, kind = 'catch', callback = catch.callback,
                            error = job.failed_reason or cjson.null, queue = job.queue,
                            job_id = job.id, name = job.name})
  lane_in(catch.tag, lane_chain_catch, spec, now)
end
