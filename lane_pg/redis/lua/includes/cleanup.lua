-- Removing many jobs (42_cleanup.sql): which jobs a drain or a clean may take, in the order
-- of their state's index (lane._removable_keys), and their removal as lane._remove_jobs
-- does it: `removed {prev}` per job, its dedup owner
-- and series released (lane_release_owners), a pending flow child told to its parent
-- (FLOW-26), an unfinished batch job settled as deleted (lane_batch_removed), then its hash,
-- index entry and logs (a parent's dependency rows with it). A repeat series' owner
-- occurrence is kept by drains and cleans (REP-16, MGMT-20).
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

-- Removes the jobs `ids` as lane._remove_jobs does: `removed {prev}` for each, in this
-- order, then their owners released, then the pending flow children told to their parents
-- (FLOW-26), then the unfinished batch jobs settled (BATCH-5), then their records. Returns
-- how many went.
local function lane_remove_ids(ids, now)
  local jobs = {}
  for _, id in ipairs(ids) do
    local job = lane_job(id)
    if job ~= nil then
      jobs[#jobs + 1] = job
      lane_emit('removed', id, {prev = job.state}, now)
    end
  end
  for _, job in ipairs(jobs) do
    LANE_REMOVING[LANE_TAG .. '\n' .. job.key] = true  -- a parent going too is not released
  end
  for _, job in ipairs(jobs) do
    lane_release_owners(job, now)
  end
  lane_flow_removed(jobs, now)
  LANE_REMOVING = {}
  for _, job in ipairs(jobs) do
    lane_batch_removed(job, now)
  end
  for _, job in ipairs(jobs) do
    if job.deps_pending ~= nil then  -- a parent among them may have moved since
      job = lane_job(job.id) or job
    end
    lane_delete(job)
  end
  return #jobs
end

-- Appends the items of `more` to `list`.
local function lane_extend(list, more)
  for _, item in ipairs(more) do
    list[#list + 1] = item
  end
  return list
end
