-- lane.get_flow_dependencies (FLOW-16, sql/functions/18_flows_inspect.sql): the parent
-- `id`, its children that exist (as they are), the pending ones and the missing ones (a
-- row naming a child that is gone), in attach order. Returns {parent, [[queue, job],
-- ...], [[queue, id], ...] pending, [[queue, id], ...] missing} or false.
-- @include json
-- @include flows

local args = lane_args()
local parent = lane_job(args.id)
if parent == nil then
  return lane_result(false)
end
local base = 'deps:' .. parent.key
local deps = {}
for _, ref in ipairs(redis.call('HKEYS', lane_key(base))) do
  deps[#deps + 1] = lane_dep_get(parent.key, ref)
end
table.sort(deps, function(a, b) return a.seq < b.seq end)
local children, pending, missing = {}, {}, {}
for _, dep in ipairs(deps) do
  local queue = string.match(dep.ref, '^([^\n]*)\n')
  local id = string.sub(dep.ref, #queue + 2)
  local child = nil
  if dep.child_key ~= nil then
    child = lane_in(dep.child_tag, lane_job, id)
    if child ~= nil and child.key ~= dep.child_key then
      child = nil
    end
    if child ~= nil then
      children[#children + 1] = {queue, child}
    else
      missing[#missing + 1] = {queue, id}
    end
  end
  if dep.bucket == 'unprocessed' then
    pending[#pending + 1] = {queue, id}
  end
end
return lane_result({parent, children, pending, missing})
