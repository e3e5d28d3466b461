-- A queue's keys and its job records. Every script's KEYS[1] is the queue's meta key
-- (`{prefix:queue}:meta`): it routes the call to the queue's cluster slot, and every other
-- key the script touches is built from the same tag, so it lies in that slot too.
--
-- A job is the hash `<tag>:job:<id>`, one field per column of lane.jobs (absent = NULL);
-- JSON columns (data, options, progress, return_value, backoff, stacktrace) hold the JSON
-- text the caller sent and are never decoded here, so a payload keeps its exact numbers and
-- its empty arrays (cjson would turn 2^60 into a float and [] into {}). Times are epoch
-- milliseconds. Each state has an index: `waiting` (scores 0, read BYLEX, order.lua),
-- `delayed` (due time), `active` (lease expiry), `waiting-children` (0), `completed` and
-- `failed` (finish time); the member is `lane_set_member(key, id)` in all but `waiting`,
-- whose member the job keeps in its field `wm`, so equal scores tie by key as in SQL.
-- @include order

local LANE_TAG = string.sub(KEYS[1], 1, -6)  -- KEYS[1] minus ':meta'
local LANE_META = KEYS[1]

-- Another queue's keys inside one script (a flow's parent, a batch's home, a chain's next
-- link): `lane_in(tag, fn, ...)` runs `fn(...)` with `tag` the queue every function here
-- works on, then switches back. A standalone server lets a script reach every key; on Redis
-- Cluster the client refuses at add a flow, batch or chain whose queues lie in more than
-- one slot, so a switch never leaves KEYS[1]'s slot there.
local function lane_switch(tag)
  LANE_TAG = tag
  LANE_META = tag .. ':meta'
end

local function lane_in(tag, fn, ...)
  if tag == nil or tag == LANE_TAG then
    return fn(...)
  end
  local saved = LANE_TAG
  lane_switch(tag)
  local a, b = fn(...)
  lane_switch(saved)
  return a, b
end

local function lane_key(name)
  return LANE_TAG .. ':' .. name
end

local function lane_job_key(id)
  return LANE_TAG .. ':job:' .. id
end

local function lane_set_member(key, id)
  return string.format('%016d:%s', key, id)
end

local LANE_INDEX = {
  ['waiting'] = 'waiting', ['delayed'] = 'delayed', ['active'] = 'active',
  ['waiting-children'] = 'waiting-children', ['completed'] = 'completed', ['failed'] = 'failed',
}

-- The job as a table of its fields (strings), or nil.
local function lane_job(id)
  local raw = redis.call('HGETALL', lane_job_key(id))
  if #raw == 0 then
    return nil
  end
  local job = {}
  for i = 1, #raw, 2 do
    job[raw[i]] = raw[i + 1]
  end
  return job
end

-- A counter of the job's (attempts_started, attempts_made, stalled_count): a new job's
-- record leaves them unset at 0 (store.lua).
local function lane_job_count(job, name)
  return tonumber(job[name] or 0)
end

-- A field's value as the hash stores it.
local function lane_field_text(value)
  if type(value) == 'number' then
    return string.format('%d', value)  -- tostring would print 1.7e+12 past 14 digits
  end
  return tostring(value)
end

-- Writes the given fields (false clears one) to the job's hash and to `job`.
local function lane_job_set(job, fields)
  local set, clear = {}, {}
  for name, value in pairs(fields) do
    if value == false then
      clear[#clear + 1] = name
      job[name] = nil
    else
      value = lane_field_text(value)
      set[#set + 1] = name
      set[#set + 1] = value
      job[name] = value
    end
  end
  if #set > 0 then
    redis.call('HSET', lane_job_key(job.id), unpack(set))
  end
  if #clear > 0 then
    redis.call('HDEL', lane_job_key(job.id), unpack(clear))
  end
end

local function lane_unindex(job)
  if job.state == 'waiting' then
    redis.call('ZREM', lane_key('waiting'), job.wm)
  else
    redis.call('ZREM', lane_key(LANE_INDEX[job.state]), lane_set_member(job.key, job.id))
  end
end

-- The job a member of `state`'s index names, or nil after dropping the member when it is
-- stale: its hash is gone, or the job is in another state, or (a removed job's id added
-- again, a requeue) its entry in that index is another member. Written by hand or left by
-- an interrupted writer, such a member must be neither revived nor crash a script.
local function lane_indexed_job(state, member)
  local id
  if state == 'waiting' then
    id = lane_member_id(member)
  else
    id = string.sub(member, 18)
  end
  local job = lane_job(id)
  if job ~= nil and job.state == state then
    if state == 'waiting' then
      if job.wm == member then
        return job
      end
    elseif lane_set_member(job.key, job.id) == member then
      return job
    end
  end
  redis.call('ZREM', lane_key(LANE_INDEX[state]), member)
  return nil
end

-- Puts the job in its state's index; `score` is the due time (delayed), the lease expiry
-- (active) or the finish time (completed, failed).
local function lane_index(job, score)
  if job.state == 'waiting' then
    redis.call('ZADD', lane_key('waiting'), 0, job.wm)
  else
    redis.call('ZADD', lane_key(LANE_INDEX[job.state]), score or 0,
               lane_set_member(job.key, job.id))
  end
end

-- The next value of the queue's enqueue sequence (ORD-2).
local function lane_next_seq()
  return redis.call('INCR', lane_key('seq'))
end

-- The fields that put a job into waiting with a fresh sequence (`seq`, else the queue's
-- next): `mode` 'front' for a release to the front of its priority, else the job's FIFO/LIFO
-- order.
local function lane_enqueue_fields(job, mode, seq)
  seq = seq or lane_next_seq()
  if mode == nil then
    mode = (job.lifo == '1') and 'lifo' or 'fifo'
  end
  local member = lane_order_member(tonumber(job.priority), mode, seq, tonumber(job.key), job.id)
  -- order_priority (update_job_priority.lua) goes: the new key is built with the priority.
  return {state = 'waiting', seq = seq, order_offset = lane_order_offset(mode, seq),
          wm = member, order_priority = false}
end

-- Moves a job (out of its index already) into waiting (lane_enqueue_fields).
local function lane_enqueue(job, mode)
  lane_job_set(job, lane_enqueue_fields(job, mode))
  lane_index(job)
end

-- A copy of the job's fields (a snapshot that later changes to `job` leave as it is).
local function lane_copy(job)
  local copy = {}
  for name, value in pairs(job) do
    copy[name] = value
  end
  return copy
end

-- The keys of a flow parent's dependency rows (includes/flows.lua), by the parent's key:
-- they go with the parent (lane._flow_forget).
local function lane_deps_keys(key)
  local base = 'deps:' .. key
  return lane_key(base), lane_key(base .. ':values'), lane_key(base .. ':reasons'),
         lane_key(base .. ':processed'), lane_key(base .. ':unprocessed'),
         lane_key(base .. ':ignored'), lane_key(base .. ':failed')
end

-- Deletes a job's records: its hash, its index entry, its logs and its dependency rows.
local function lane_delete(job)
  lane_unindex(job)
  redis.call('DEL', lane_job_key(job.id), lane_key('logs:' .. job.id))
  if job.deps_pending ~= nil then
    redis.call('DEL', lane_deps_keys(job.key))
  end
end

-- Deletes the job a member of `state`'s finish index names (already out of the index),
-- with its logs and a parent's dependency rows, unless the member is stale: a job in
-- another state (or gone) is left as it is (REDIS-7), never deleted as a finished one.
local function lane_forget_finished(state, member)
  local id = string.sub(member, 18)
  local f = redis.call('HMGET', lane_job_key(id), 'state', 'key')
  if f[1] ~= state or lane_set_member(f[2], id) ~= member then
    return false
  end
  redis.call('DEL', lane_job_key(id), lane_key('logs:' .. id))
  redis.call('DEL', lane_deps_keys(string.format('%d', tonumber(string.sub(member, 1, 16)))))
  return true
end

-- The queue's setting `name` (meta hash), or `default`. (`lane_key('meta')`, not KEYS[1]:
-- a settlement or a flow may work in another queue, lane_in.)
local function lane_meta(name, default)
  local value = redis.call('HGET', LANE_META, name)
  if value == false then
    return default
  end
  return value
end

-- Creates the queue's meta hash on first use (a queue exists once it has one). The list of
-- queues is another slot's key, so the client records the name there, not the script.
local function lane_ensure_queue(now)
  redis.call('HSETNX', LANE_META, 'created_at', now)
end
