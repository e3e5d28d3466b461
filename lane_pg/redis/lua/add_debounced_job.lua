-- lane.add_debounced_job (UNIQ-9..11): one dispatch of the debounce window
-- `args.spec.dedup.id`, read and written in one step. The window's job, while it blocks:
-- removed when delayed and standalone (replaced), else kept (superseded: the window is
-- this dispatch's). Once the burst has waited `args.max_wait_ms` since its first dispatch
-- (the row's created_at), `args.flushed` (the spec without the window, due at once) is
-- stored and the window released. Returns {job, replaced}.
-- @include json
-- @include now
-- @include add

local args = lane_args()
local now = lane_now(args.now)
local spec = args.spec
-- The window's own row is read below (a reservation of it is dropped, as any row is).
local refused = lane_add_check(args, {{id = spec.id, series = spec.series}, args.flushed}, now)
if refused ~= nil then
  return lane_result(refused)
end
lane_ensure_queue(now)
local window = spec.dedup.id
local owner = lane_owner(window)
local holder = nil
if owner ~= nil then
  holder = lane_owner_job(window, owner, now)
end
local first = now
local replaced = nil
if holder ~= nil and owner.created_at ~= nil then
  first = tonumber(owner.created_at)  -- the burst goes on
end
if owner ~= nil then
  lane_owner_delete(window)  -- the window is this dispatch's, or released (flush)
end
if holder ~= nil and lane_replaceable(holder) then
  lane_remove_standalone(holder, now)
  replaced = holder.id
end
local max_wait = lane_given(args.max_wait_ms)
if max_wait ~= nil and now - first >= max_wait then
  local flushed = lane_add_specs({args.flushed}, now)[1]
  return lane_result({job = flushed, replaced = replaced or false})
end
local job = lane_add_specs({spec}, now)[1]
local row = lane_owner(window)
if row ~= nil and row.job_key == job.key then
  redis.call('HSET', lane_owner_key(window), 'created_at', string.format('%d', first))
end
if replaced ~= nil then
  lane_dedup_events(job.id, window, replaced, now)
end
return lane_result({job = job, replaced = replaced or false})
