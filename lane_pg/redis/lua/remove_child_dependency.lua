-- lane.remove_child_dependency (FLOW-25, sql/functions/18_flows_inspect.sql): the child
-- `id` leaves its parent, its dependency row (and result) with it; a parent no longer
-- waiting for anything is released, and a deferred failure no failing child is left for
-- is cleared (FIN-8). Returns {'ok', detached?} or {'not_found'}.
-- @include json
-- @include now
-- @include flows

local args = lane_args()
local now = lane_now(args.now)
local child = lane_job(args.id)
if child == nil then
  return lane_result({'not_found'})
end
if child.parent_id == nil then
  return lane_result({'ok', false})
end
local own = lane_flow_own_queue(child)
local ptag, pid = child.ptag, child.parent_id
lane_job_set(child, {parent_queue = false, parent_id = false, ptag = false})
lane_in(ptag, function()
  local parent = lane_job(pid)
  if parent == nil then
    return
  end
  local dep = lane_dep_get(parent.key, lane_dep_ref(own, args.id))
  if dep == nil then
    return
  end
  local base = 'deps:' .. parent.key
  redis.call('HDEL', lane_key(base), dep.ref)
  redis.call('HDEL', lane_key(base .. ':values'), dep.ref)
  redis.call('HDEL', lane_key(base .. ':reasons'), dep.ref)
  if LANE_PAGED[dep.bucket] then
    redis.call('ZREM', lane_key(base .. ':' .. dep.bucket), dep.ref)
  end
  if dep.bucket == 'failed' and redis.call('ZCARD', lane_key(base .. ':failed')) == 0 then
    lane_job_set(parent, {deferred_failure = false})
  end
  if dep.bucket == 'unprocessed' then
    local pending = tonumber(parent.deps_pending) - 1
    lane_job_set(parent, {deps_pending = pending})
    if parent.state == 'waiting-children' and pending <= 0 then
      lane_flow_release({{ptag, pid}}, now)
    end
  end
end)
return lane_result({'ok', true})
