-- Batches (sql/functions/19_batches.sql): a batch's record, its jobs' settlements and its
-- callback jobs. A batch lives in its home queue's tag, the queue its callbacks go to
-- (`callback_queue`: every batch has one, an empty batch too, and the settlement that
-- writes a callback writes the record beside it):
--   batch:<id>          hash: name, total, options (JSON text as sent), allow_failures
--                       ('1'), callbacks ({kind: {callback, spec}} as JSON text, the spec
--                       checked by the client, its data written here), created_at,
--                       cancelled_at, finished_at
--   batch:<id>:settled  hash: '<queue> <job id>' -> outcome (completed, failed, deleted)
--   batch:<id>:failed   sorted set: the failed members by settled_at, then member, the
--                       order of failed_job_ids and of the first error
--   batch:<id>:reasons  hash: failed member -> the job's failed_reason
--   batch:<id>:jobs     list: '<job tag> <job id>' per job, in the order they were stored
--                       (cancel_batch's removal of those not started)
-- A batch's job carries `batch_id`, `batch_tag` (the home's tag) and `queue` (its own
-- queue's name, which a tag cannot give back: a prefix may hold ':'). Counts are derived
-- from `settled` and `failed` on every read, never stored (BATCH-5). Settling is called by
-- every script that ends a job (finish.lua, cleanup.lua, remove_job, discard_job,
-- obliterate_queue, cancel_batch) in the same script as the end itself.
-- @include add
-- @include events

local function lane_batch_key(id, part)
  if part == nil then
    return lane_key('batch:' .. id)
  end
  return lane_key('batch:' .. id .. ':' .. part)
end

-- The batch record `id` of the current tag as a table of its fields, or nil.
local function lane_batch(id)
  local raw = redis.call('HGETALL', lane_batch_key(id))
  if #raw == 0 then
    return nil
  end
  local batch = {}
  for i = 1, #raw, 2 do
    batch[raw[i]] = raw[i + 1]
  end
  return batch
end

-- lane._batch_callback: the callback job of `kind` when the batch names one, added to the
-- home queue with the id batch-<id>-<kind> (a second add finds it: never doubled).
local function lane_batch_callback(id, batch, kind, error_text, now)
  local callbacks = cjson.decode(batch.callbacks)
  local callback = callbacks[kind]
  if callback == nil then
    return
  end
  local spec = callback.spec
  spec.data = cjson.encode({batch_id = id, kind = kind, callback = callback.callback,
                            error = error_text or cjson.null})
  lane_ensure_queue(now)
  lane_add_specs({spec}, now)
end

-- lane._batch_progress, after a settlement of `id` that wrote `new_failed` failures: the
-- first failure cancels the batch (unless it allows failures) and enqueues catch; the last
-- settlement finishes it and enqueues then (nothing failed, not cancelled) and finally.
local function lane_batch_progress(id, batch, new_failed, now)
  local settled = redis.call('HLEN', lane_batch_key(id, 'settled'))
  local failed = redis.call('ZCARD', lane_batch_key(id, 'failed'))
  local first_error = nil
  if failed > 0 then
    local first = redis.call('ZRANGE', lane_batch_key(id, 'failed'), 0, 0)[1]
    first_error = redis.call('HGET', lane_batch_key(id, 'reasons'), first) or nil
  end
  if new_failed > 0 and failed == new_failed then  -- the batch's first failure
    if batch.allow_failures ~= '1' and batch.cancelled_at == nil then
      redis.call('HSET', lane_batch_key(id), 'cancelled_at', string.format('%d', now))
    end
    lane_batch_callback(id, batch, 'catch', first_error, now)
  end
  if batch.finished_at == nil and settled >= tonumber(batch.total) then
    redis.call('HSET', lane_batch_key(id), 'finished_at', string.format('%d', now))
    if failed == 0 and batch.cancelled_at == nil then
      lane_batch_callback(id, batch, 'then', nil, now)
    end
    lane_batch_callback(id, batch, 'finally', first_error, now)
  end
end

-- lane._batch_settle for one job, in the home's tag: once per job (HSETNX), nothing for a
-- pruned batch.
local function lane_batch_settle_home(job, outcome, now)
  local id = job.batch_id
  local batch = lane_batch(id)
  if batch == nil then
    return
  end
  local member = job.queue .. ' ' .. job.id
  if redis.call('HSETNX', lane_batch_key(id, 'settled'), member, outcome) == 0 then
    return  -- settled before (a retried job keeps its first settlement)
  end
  local new_failed = 0
  if outcome == 'failed' then
    redis.call('ZADD', lane_batch_key(id, 'failed'), string.format('%d', now), member)
    if job.failed_reason ~= nil then
      redis.call('HSET', lane_batch_key(id, 'reasons'), member, job.failed_reason)
    end
    new_failed = 1
  end
  lane_batch_progress(id, batch, new_failed, now)
end

-- Settles `job` (a table of its fields) as `outcome` when it belongs to a batch.
local function lane_batch_settle(job, outcome, now)
  if job.batch_id ~= nil then
    lane_in(job.batch_tag, lane_batch_settle_home, job, outcome, now)
  end
end

-- BATCH-9: a job removed before it finished settles as deleted. Called after its removal,
-- with its fields as they were (its state the one it left).
local function lane_batch_removed(job, now)
  if job.state ~= 'completed' and job.state ~= 'failed' then
    lane_batch_settle(job, 'deleted', now)
  end
end

-- lane._batch_store, in the home's tag: `groups` [{tag, queue, positions, specs}], one per
-- queue in first-appearance order, each stored through the add path and stamped with the
-- batch. Returns the jobs' ids by input position.
local function lane_batch_store(id, groups, now)
  local home = LANE_TAG
  local ids, members = {}, {}
  local function store(group)
    lane_ensure_queue(now)
    for i, job in ipairs(lane_add_specs(group.specs, now)) do
      lane_job_set(job, {batch_id = id, batch_tag = home, queue = group.queue})
      ids[group.positions[i]] = job.id
      members[#members + 1] = group.tag .. ' ' .. job.id
    end
  end
  for _, group in ipairs(groups) do
    lane_in(group.tag, store, group)
  end
  for first = 1, #members, 1000 do
    redis.call('RPUSH', lane_batch_key(id, 'jobs'),
               unpack(members, first, math.min(first + 999, #members)))
  end
  return ids
end
