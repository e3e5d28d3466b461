-- lane.remove_unprocessed_children (FLOW-24, sql/functions/18_flows_inspect.sql): the
-- parent `id`'s pending children nobody runs or holds (waiting, delayed, waiting-children)
-- are removed as lane._remove_jobs removes them, releasing the parent when nothing is
-- pending; their rows stay, as missing. Returns {'ok', [[queue, job], ...]} (the removed
-- jobs as they were) or {'not_found'}.
-- @include json
-- @include now
-- @include cleanup

local args = lane_args()
local now = lane_now(args.now)
local LANE_TAG_OF_PARENT = LANE_TAG
local parent = lane_job(args.id)
if parent == nil then
  return lane_result({'not_found'})
end
local refs = redis.call('ZRANGE', lane_key('deps:' .. parent.key .. ':unprocessed'), 0, -1)
local doomed, by_tag, tags = {}, {}, {}
for _, ref in ipairs(refs) do
  local dep = lane_dep_get(parent.key, ref)
  if dep ~= nil and dep.child_key ~= nil then
    local queue = string.match(ref, '^([^\n]*)\n')
    local id = string.sub(ref, #queue + 2)
    local child = lane_in(dep.child_tag, lane_job, id)
    if child ~= nil and child.key == dep.child_key and (child.state == 'waiting'
       or child.state == 'delayed' or child.state == 'waiting-children') then
      doomed[#doomed + 1] = {queue, lane_copy(child)}
      if by_tag[dep.child_tag] == nil then
        by_tag[dep.child_tag] = {}
        tags[#tags + 1] = dep.child_tag
      end
      table.insert(by_tag[dep.child_tag], child)
    end
  end
end
for _, tag in ipairs(tags) do
  lane_in(tag, function()
    local ids = {}
    for i, child in ipairs(by_tag[tag]) do
      ids[i] = child.id
    end
  end)
end
for _, tag in ipairs(tags) do
  lane_in(tag, function()
    local ids = {}
    for i, child in ipairs(by_tag[tag]) do
      ids[i] = child.id
    end
    lane_remove_ids(ids, now)
  end)
end
-- DEDUP-18: the kept next jobs it waits for are dropped too (their rows keep the owner).
for _, ref in ipairs(redis.call('ZRANGE', lane_key('deps:' .. parent.key .. ':unprocessed'), 0, -1)) do
  local dep = lane_dep_get(parent.key, ref)
  if dep ~= nil and dep.child_key == nil then
    local dedup_id = string.sub(ref, #string.match(ref, '^([^\n]*)\n') + 4)
    lane_in(dep.child_tag, function()
      local owner = lane_owner(dedup_id)
      local _, waiting = lane_waiting_parent(owner)
      if waiting ~= nil and waiting.key == parent.key
         and string.match(owner.next_parent, '^([^\n]*)\n') == LANE_TAG_OF_PARENT then
        lane_dedup_next_dropped(dedup_id, owner, now)
        for _, name in ipairs({'next', 'next_parent', 'next_queue', 'next_policy', 'next_children'}) do
          redis.call('HDEL', lane_owner_key(dedup_id), name)
        end
      end
    end)
  end
end
if #doomed == 0 then
  return lane_result({'ok', {}})
end
return lane_result({'ok', doomed})
