-- A queue's events: the stream `<tag>:events`, one entry per event, with ids `0-<n>` from
-- the queue's counter `<tag>:event_id`, so an event's id is the integer n (QueueEvent.id)
-- and ids increase along the stream (one exception: lane_emit_added_waiting's entry holds
-- two events, n and n + 1). XADD trims it with MAXLEN ~ (the queue's
-- `events_max`, default LANE_EVENTS_MAX), so the stream never grows without bound. A queue
-- whose `record_events` is '0' writes none (lane._emit).
-- @include job

local LANE_EVENTS_MAX = 10000
local lane_events_on = {}  -- by queue tag (a flow's script may write to several queues)
local lane_events_max = {}

-- Both settings read once per script and queue (no script changes them and emits): one
-- HMGET where every event read `events_max` again (an add emits two).
local function lane_records_events()
  local on = lane_events_on[LANE_TAG]
  if on == nil then
    local meta = redis.call('HMGET', LANE_META, 'record_events', 'events_max')
    on = meta[1] ~= '0'
    lane_events_on[LANE_TAG] = on
    lane_events_max[LANE_TAG] = tonumber(meta[2] or LANE_EVENTS_MAX)
  end
  return on
end

-- An add's one read of its queue's settings (lane_ensure_queue, lane_records_events and
-- lane_wake's three HSETNX and HMGETs in one HMGET, 2 commands fewer a one-job add): creates
-- the queue's record when missing, primes the event settings, and gives the hold flags
-- for lane_wake(held) to use when nothing between changes them.
local function lane_open_queue(now)
  local meta = redis.call('HMGET', LANE_META, 'created_at', 'record_events', 'events_max',
                          'paused', 'paused_all', 'max_active')
  if not meta[1] then
    redis.call('HSET', LANE_META, 'created_at', now)
  end
  lane_events_on[LANE_TAG] = meta[2] ~= '0'
  lane_events_max[LANE_TAG] = tonumber(meta[3] or LANE_EVENTS_MAX)
  return {meta[4], meta[5], meta[6]}
end

-- Emits `event` with data given as JSON text (a payload inside stays as it was sent), under
-- event id `n` when the caller reserved it (INCRBY), else the next one.
local function lane_emit_raw(event, job_id, data_json, now, n)
  if not lane_records_events() then
    return nil
  end
  n = n or redis.call('INCR', lane_key('event_id'))
  redis.call('XADD', lane_key('events'), 'MAXLEN', '~', lane_events_max[LANE_TAG], '0-' .. n,
             'e', event, 'j', job_id or '', 'd', data_json, 't', now)
  return n
end

-- A one-job add's `added` (id n) and `waiting` (id n + 1, no data) as one entry `0-<n>`
-- with field `w` (events.py reads it as both): one XADD fewer a one-job add (the two
-- XADDs were ~7 % of a one-job add's time through the client, W1).
local function lane_emit_added_waiting(job_id, name, now, n)
  if not lane_records_events() then
    return
  end
  redis.call('XADD', lane_key('events'), 'MAXLEN', '~', lane_events_max[LANE_TAG], '0-' .. n,
             'e', 'added', 'j', job_id, 'd', cjson.encode({name = name}), 't', now, 'w', '1')
end

-- Emits `event` with data from a table of plain values (strings, numbers, booleans).
local function lane_emit(event, job_id, data, now, n)
  local text = '{}'
  if data ~= nil and next(data) ~= nil then
    text = cjson.encode(data)
  end
  return lane_emit_raw(event, job_id, text, now, n)
end

-- OBS-6: one more job finished in `state` in the minute of `now`.
local function lane_count_finished(state, count, now)
  local minute = math.floor(now / 60000) * 60000
  redis.call('HINCRBY', lane_key('metrics:' .. state), minute, count)
end

-- Wakes the queue's idle claimers whatever the queue's state: the base marker, member '0'
-- at score 0, in the set they block on (BZPOPMIN). For callers that know a claim can
-- succeed (claim_jobs checked the flags and limits) or must wake them anyway (a restart).
local function lane_wake_unchecked()
  redis.call('ZADD', lane_key('marker'), 0, '0')
end

-- Wakes the queue's idle claimers unless a claim would find the queue held: paused (its own
-- flag or the connection-wide one) or at its max-active ceiling. A woken claimer would
-- only find the same hold; resume and the finish that frees a slot wake them then. `held`:
-- the flags lane_open_queue read (nil: read them now).
local function lane_wake(held)
  local meta = held or redis.call('HMGET', LANE_META, 'paused', 'paused_all', 'max_active')
  if meta[1] == '1' or meta[2] == '1' then
    return
  end
  if meta[3] and redis.call('ZCARD', lane_key('active')) >= tonumber(meta[3]) then
    return
  end
  lane_wake_unchecked()
end

-- FIN-7: `drained` when the queue has no waiting and no active job left. A job stopped
-- being active: with waiting jobs left, a queue under max_active wakes the claimers the
-- ceiling held back (CLAIM-9, lane._wake_if_capped).
local function lane_drained_check(now)
  if redis.call('ZCARD', lane_key('waiting')) > 0 then
    if redis.call('HEXISTS', LANE_META, 'max_active') == 1 then
      lane_wake()
    end
  elseif redis.call('ZCARD', lane_key('active')) == 0 then
    lane_emit('drained', nil, nil, now)
  end
end

-- A job due at `due` was stored (and indexed): the delayed marker, member '1', takes the
-- earliest due time of the queue's delayed jobs. BZPOPMIN hands it over at once whatever
-- its score: the claimer it wakes, finding nothing due yet, sleeps until the earliest due
-- time its claim reports (next_due), as PostgreSQL's workers do.
local function lane_wake_at(due)
  local first = redis.call('ZRANGE', lane_key('delayed'), 0, 0, 'WITHSCORES')
  redis.call('ZADD', lane_key('marker'), first[2] or due, '1')
end
