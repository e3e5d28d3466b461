-- lane.get_flow_dependency_counts (FLOW-17, sql/functions/18_flows_inspect.sql): the
-- parent `id`'s dependencies per bucket, and how many name a child that is gone (missing;
-- a placeholder for a kept next job is to come, not missing). Returns the counts or false.
-- @include json
-- @include flows

local args = lane_args()
local parent = lane_job(args.id)
if parent == nil then
  return lane_result(false)
end
local base = 'deps:' .. parent.key
local counts = {missing = 0}
for bucket in pairs(LANE_PAGED) do
  counts[bucket] = redis.call('ZCARD', lane_key(base .. ':' .. bucket))
end
local refs = redis.call('HKEYS', lane_key(base))
for _, ref in ipairs(refs) do
  local dep = lane_dep_get(parent.key, ref)
  if dep.child_key ~= nil then
    local id = string.sub(ref, #string.match(ref, '^([^\n]*)\n') + 2)
    local key = lane_in(dep.child_tag, function()
      return redis.call('HGET', lane_job_key(id), 'key')
    end)
    if key ~= dep.child_key then
      counts.missing = counts.missing + 1
    end
  end
end
return lane_result(counts)
