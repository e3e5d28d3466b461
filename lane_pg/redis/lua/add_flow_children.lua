-- lane.add_flow_children (FLOW-14, FLOW-15): the parent `id`, active under `token`, adds
-- children (nodes as add_flow.lua's) and waits for them in waiting-children: its lease
-- ends and the run does not count as an attempt; released at once if nothing it attached
-- is pending. Refused ({error, message}, nothing written) while a child failure fails it
-- (LN012), or as add_flow.lua refuses; {status} when it is not active under the token.
-- Returns {'ok', [[path, queue, job], ...]}.
-- @include json
-- @include now
-- @include finish
-- @include flows_add

local args = lane_args()
local now = lane_now(args.now)
local parent, status = lane_owned(args.id, args.token)
if parent == nil then
  return lane_result({status})
end
if parent.deferred_failure ~= nil
   or redis.call('ZCARD', lane_key('deps:' .. parent.key .. ':failed')) > 0 then
  return lane_result({error = 'failed_children', message = 'job ' .. args.id .. ' of queue '
                      .. args.queue .. ' has a failed child that fails it: it cannot add'
                      .. ' children'})
end
local refused = lane_flow_conflict(args.children, args.queue, args.id, args, now)
if refused ~= nil then
  return lane_result(refused)
end
lane_unindex(parent)
lane_job_set(parent, {state = 'waiting-children', lock_token = false, lease_expires_at = false,
                      worker_id = false, seq = false,
                      attempts_started = math.max(lane_job_count(parent, 'attempts_started') - 1, 0),
                      deps_pending = parent.deps_pending or 0})
lane_index(parent)
lane_emit('waiting-children', parent.id, {prev = 'active'}, now)
if redis.call('HEXISTS', KEYS[1], 'max_active') == 1 then  -- CLAIM-9: its slot is free
  lane_wake()
end
local stored = {}
lane_flow_attach(parent, LANE_TAG, args.queue, args.children, {}, now, stored)
return lane_result({'ok', lane_flow_rows(stored)})
