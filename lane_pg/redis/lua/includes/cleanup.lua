-- Removing many jobs (42_cleanup.sql): which jobs a drain or a clean may take, in the order
-- of their state's index (lane._removable_keys), and their removal as lane._remove_jobs
-- does it for the job model Redis holds so far: `removed {prev}` per job, then its hash,
-- index entry and logs. Jobs with a deduplication id, a repeat series, a flow (a parent
-- waiting for children, a child) or a batch cannot be added on Redis yet; their removal
-- has more to do (owners, series, parents), so a call that meets one refuses before it
-- writes anything (lane_check_removable), rather than removing it half.
-- @include finish

local LANE_PAGE = 1000  -- index members read per ZRANGE

-- The job id of a member of `state`'s index (job.lua: `waiting` spells out the order).
local function lane_index_id(state, member)
  if state == 'waiting' then
    return lane_member_id(member)
  end
  return string.sub(member, 18)
end

-- The ids of the jobs of `state` a drain (`cut` nil) or a clean may remove, in the state's
-- index order, at most `limit` (nil: all). Completed and failed: finished before `cut` (the
-- index's score); active: expired leases only (MGMT-19, the index's score is the lease's
-- end), started before `cut`; waiting (claim order) and delayed (due order): added before
-- `cut`. (Times go into commands through string.format('%d'): `..` would print a number past
-- 14 digits as 1.7e+14.)
local function lane_removable(state, cut, limit, now)
  local index = lane_key(state)
  local chosen = {}
  if state == 'completed' or state == 'failed' then
    local members
    if limit ~= nil then
      members = redis.call('ZRANGE', index, '-inf', string.format('(%d', cut), 'BYSCORE',
                           'LIMIT', 0, limit)
    else
      members = redis.call('ZRANGE', index, '-inf', string.format('(%d', cut), 'BYSCORE')
    end
    for i, member in ipairs(members) do
      chosen[i] = lane_index_id(state, member)
    end
    return chosen
  end
  local field = (state == 'active') and 'processed_at' or 'created_at'
  local offset = 0
  while true do
    local members
    if state == 'active' then
      members = redis.call('ZRANGE', index, '-inf', string.format('(%d', now), 'BYSCORE',
                           'LIMIT', offset, LANE_PAGE)
    else
      members = redis.call('ZRANGE', index, offset, offset + LANE_PAGE - 1)
    end
    for _, member in ipairs(members) do
      local id = lane_index_id(state, member)
      local taken = cut == nil
      if not taken then
        local moment = redis.call('HGET', lane_job_key(id), field)
        taken = moment ~= false and tonumber(moment) < cut
      end
      if taken then
        chosen[#chosen + 1] = id
        if limit ~= nil and #chosen >= limit then
          return chosen
        end
      end
    end
    if #members < LANE_PAGE then
      return chosen
    end
    offset = offset + #members
  end
end

-- Refuses (an error, before any write of the calling script) when one of the jobs `ids`
-- uses a part of the job model whose removal Redis cannot do yet (see above).
local function lane_check_removable(ids)
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', lane_job_key(id), 'state', 'dedup_id', 'repeat_key',
                         'parent_id', 'batch_id')
    if f[1] == 'waiting-children' then
      error('lane_pg: removing a flow parent is not available on the Redis backend yet')
    end
    lane_check_plain({dedup_id = f[2], repeat_key = f[3], parent_id = f[4], batch_id = f[5]})
  end
end

-- Removes the jobs `ids` (checked with lane_check_removable): `removed {prev}` for each,
-- in this order, then its records. Returns how many went.
local function lane_remove_ids(ids, now)
  local removed = 0
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', lane_job_key(id), 'state', 'key', 'wm')
    if f[1] then
      lane_emit('removed', id, {prev = f[1]}, now)
      lane_delete({id = id, state = f[1], key = f[2], wm = f[3]})
      removed = removed + 1
    end
  end
  return removed
end

-- Appends the items of `more` to `list`.
local function lane_extend(list, more)
  for _, item in ipairs(more) do
    list[#list + 1] = item
  end
  return list
end
