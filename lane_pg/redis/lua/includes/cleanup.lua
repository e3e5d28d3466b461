-- Removing many jobs (42_cleanup.sql): which jobs a drain or a clean may take, in the order
-- of their state's index (lane._removable_keys), and their removal as lane._remove_jobs
-- does it for the job model Redis holds so far: `removed {prev}` per job, its dedup owner
-- and series released (lane_release_owners), then its hash, index entry and logs, and an
-- unfinished batch job settled as deleted (lane_batch_removed). A repeat series' owner
-- occurrence is kept by drains and cleans (REP-16, MGMT-20). Jobs of a flow (a parent
-- waiting for children, a child) cannot be added on Redis yet; their removal has more to
-- do (parents), so a call that meets one refuses before it writes anything
-- (lane_check_removable), rather than removing it half.
-- @include finish

local LANE_PAGE = 1000  -- index members read per ZRANGE

-- The job id of a member of `state`'s index (job.lua: `waiting` spells out the order).
local function lane_index_id(state, member)
  if state == 'waiting' then
    return lane_member_id(member)
  end
  return string.sub(member, 18)
end

-- lane._is_repeat_owner: the job `id` is the occurrence its series names.
local function lane_is_repeat_owner(id)
  local f = redis.call('HMGET', lane_job_key(id), 'repeat_key', 'key')
  if not f[1] then
    return false
  end
  return redis.call('HGET', lane_series_key(f[1]), 'job_key') == f[2]
end

-- The ids of the jobs of `state` a drain (`cut` nil) or a clean may remove, in the state's
-- index order, at most `limit` (nil: all), a series' owner occurrence left. Completed and failed: finished before `cut` (the
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
      taken = taken and not lane_is_repeat_owner(id)
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
                         'parent_id')
    if f[1] == 'waiting-children' then
      error('lane_pg: removing a flow parent is not available on the Redis backend yet')
    end
    lane_check_plain({dedup_id = f[2], repeat_key = f[3], parent_id = f[4]})
  end
end

-- Removes the jobs `ids` (checked with lane_check_removable): `removed {prev}` for each,
-- in this order, then its records. Returns how many went.
local function lane_remove_ids(ids, now)
  local removed = 0
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', lane_job_key(id), 'state', 'key', 'wm', 'dedup_id',
                         'repeat_key', 'batch_id', 'batch_tag', 'queue')
    if f[1] then
      local job = {id = id, state = f[1], key = f[2], wm = f[3], dedup_id = f[4] or nil,
                   repeat_key = f[5] or nil, batch_id = f[6] or nil, batch_tag = f[7] or nil,
                   queue = f[8] or nil}
      lane_emit('removed', id, {prev = f[1]}, now)
      lane_release_owners(job, now)
      lane_delete(job)
      lane_batch_removed(job, now)
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
