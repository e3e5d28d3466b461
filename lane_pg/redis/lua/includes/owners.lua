-- Deduplication owners (15_dedup.sql) and repeat series (16_repeats.sql) of one queue.
--
-- An owner is the hash `<tag>:dedup:<id>`: kind ('dedup' | 'unique'), job_id and job_key
-- (absent for a reservation, TX-10), expires_at (epoch ms; absent = no TTL), keep_last
-- ('1'), token, created_at, next (the kept next job's spec, cjson text, DEDUP-9). Expiry is
-- stored and compared with the script's `now` (the suite injects it), never a Redis TTL;
-- `<tag>:dedup-expiry` indexes the rows that have one (expire_dedup_owners). Unique ids are
-- one lock per queue here, not per connection: a script reaches one hash tag only.
--
-- A series is the hash `<tag>:repeat:<key>`: job_id, job_key (the owner occurrence),
-- name, every_ms | pattern (+ tz), limit, end_at, count, next_at (the owner's tick, the
-- anchor of the next), options (the template's options text) and template (the spec the
-- next occurrence is added from, cjson text); `<tag>:repeats` is the set of series keys.
--
-- Cron matches are computed by the client (lane_pg.types.schedule, the rules of
-- 08_schedule.sql) and passed in `args.cron` as '<pattern>\n<tz>\n<after>' -> tick | null:
-- a script that may need one checks first (lane_schedule_needs) and, when one is missing,
-- returns {lane_ticks = needs, now = now} before it writes anything; the client computes
-- them and calls again at that `now` (lane_pg.redis.repeats.call_scheduled).
-- @include flows

local LANE_MAX_INT = 2147483647
local LANE_LAST_MS = 253402300799999  -- 9999-12-31T23:59:59.999Z
local LANE_TICKS = {}

local function lane_given(value)
  if value == cjson.null then
    return nil
  end
  return value
end

-- ------------------------------------------------------------------ schedule (08_schedule)

local function lane_tick_id(pattern, tz, after)
  return pattern .. '\n' .. (tz or '') .. '\n' .. string.format('%d', after)
end

-- The first match of `pattern` in `tz` strictly after `after`, or nil (none); `missing`
-- when the client has not computed it.
local function lane_cron_next(pattern, tz, after)
  local tick = LANE_TICKS[lane_tick_id(pattern, lane_given(tz), after)]
  if tick == nil then
    return nil, true
  end
  if tick == cjson.null then
    return nil, false
  end
  return tonumber(tick), false
end

-- lane._repeat_next for a schedule `rep` {every_ms | pattern, tz, end_at} (numbers or
-- strings): nil when the next tick is past end_at; `missing` as lane_cron_next.
local function lane_repeat_next(rep, prev, now)
  local following
  local every = tonumber(lane_given(rep.every_ms))
  if every ~= nil then
    if prev == nil then
      following = now
    else
      local steps = 1
      if now - prev >= 0 then
        steps = math.floor((now - prev) / every) + 1
      end
      -- The division is a double's: step to the exact first tick after now.
      while steps > 1 and prev + (steps - 1) * every > now do
        steps = steps - 1
      end
      while prev + steps * every <= now do
        steps = steps + 1
      end
      following = prev + steps * every
      if following > LANE_LAST_MS then
        return nil, false
      end
    end
  else
    local after = now
    if prev ~= nil and prev > now then
      after = prev
    end
    local missing
    following, missing = lane_cron_next(rep.pattern, rep.tz, after)
    if missing then
      return nil, true
    end
  end
  local end_at = tonumber(lane_given(rep.end_at))
  if following ~= nil and end_at ~= nil and following > end_at then
    return nil, false
  end
  return following, false
end

-- ------------------------------------------------------------------------ owner records

local function lane_hash(key)
  local raw = redis.call('HGETALL', key)
  if #raw == 0 then
    return nil
  end
  local record = {}
  for i = 1, #raw, 2 do
    record[raw[i]] = raw[i + 1]
  end
  return record
end

local function lane_owner_key(dedup_id)
  return lane_key('dedup:' .. dedup_id)
end

local function lane_owner(dedup_id)
  return lane_hash(lane_owner_key(dedup_id))
end

-- Writes the owner row of `dedup_id` whole (fields false or absent are not stored).
local function lane_owner_write(dedup_id, owner)
  local key = lane_owner_key(dedup_id)
  redis.call('DEL', key)
  local fields = {}
  for name, value in pairs(owner) do
    if value ~= false and value ~= nil then
      if type(value) == 'number' then
        value = string.format('%d', value)
      end
      fields[#fields + 1] = name
      fields[#fields + 1] = tostring(value)
    end
  end
  if #fields > 0 then
    redis.call('HSET', key, unpack(fields))
  end
  if owner.expires_at then
    redis.call('ZADD', lane_key('dedup-expiry'), tonumber(owner.expires_at), dedup_id)
  else
    redis.call('ZREM', lane_key('dedup-expiry'), dedup_id)
  end
end

-- Deletes the owner row of `dedup_id`; with `now`, a kept next job's parent stops waiting
-- for it (DEDUP-18: lane._dedup_next_dropped). Without, the caller stores it (a finish).
local function lane_owner_delete(dedup_id, now)
  if now ~= nil then
    local owner = lane_owner(dedup_id)
    if owner ~= nil and owner.next_parent ~= nil then
      lane_dedup_next_dropped(dedup_id, owner, now)
    end
  end
  redis.call('DEL', lane_owner_key(dedup_id))
  redis.call('ZREM', lane_key('dedup-expiry'), dedup_id)
end

-- A live reservation: it blocks the id but names no job yet (TX-10).
local function lane_owner_reserved(owner, now)
  return owner.job_key == nil and owner.expires_at ~= nil and tonumber(owner.expires_at) > now
end

-- lane._dedup_owner_job: the owner's job while the row blocks duplicates, else nil.
local function lane_owner_job(dedup_id, owner, now)
  if owner.job_id == nil then
    return nil
  end
  local job = lane_job(owner.job_id)
  if job == nil or job.key ~= owner.job_key or job.dedup_id ~= dedup_id then
    return nil
  end
  if job.state == 'active' and owner.keep_last == '1' then
    return job
  end
  if owner.expires_at ~= nil then
    if tonumber(owner.expires_at) > now then
      return job
    end
    return nil
  end
  if job.state ~= 'completed' and job.state ~= 'failed' then
    return job
  end
  return nil
end

-- DEDUP-2: `debounced` and `deduplicated` on the job keeping the id.
local function lane_dedup_event_data(dedup_id, loser_id)
  return {deduplicationId = dedup_id, deduplicatedJobId = loser_id}
end

local function lane_dedup_events(owner_id, dedup_id, loser_id, now)
  lane_emit('debounced', owner_id, lane_dedup_event_data(dedup_id, loser_id), now)
  lane_emit('deduplicated', owner_id, lane_dedup_event_data(dedup_id, loser_id), now)
end

-- lane._dedup_replaceable (DEDUP-7): a standalone delayed job.
local function lane_replaceable(job)
  return job.state == 'delayed' and job.parent_id == nil and job.deps_pending == nil
         and job.repeat_key == nil
end

-- ------------------------------------------------------------------------ series records

local function lane_series_key(series_key)
  return lane_key('repeat:' .. series_key)
end

local function lane_series(series_key)
  return lane_hash(lane_series_key(series_key))
end

local function lane_series_delete(series_key)
  redis.call('DEL', lane_series_key(series_key))
  redis.call('SREM', lane_key('repeats'), series_key)
end

-- lane._repeat_owner: the row's owner while it is one (exists, its own, unfinished).
local function lane_series_owner(series_key, row)
  local job = lane_job(row.job_id)
  if job == nil or job.key ~= row.job_key or job.repeat_key ~= series_key
     or job.state == 'completed' or job.state == 'failed' then
    return nil
  end
  return job
end

-- The row's owner when it completed (the successor is anchored to its tick), else nil.
local function lane_series_completed(series_key, row)
  local job = lane_job(row.job_id)
  if job ~= nil and job.key == row.job_key and job.repeat_key == series_key
     and job.state == 'completed' then
    return job
  end
  return nil
end

-- ----------------------------------------------------------------------------- release

-- DEDUP-12, REP-7: a job about to be deleted gives up its dedup id and ends its series,
-- each only while the row still names it. Every removal path calls this, after its
-- `removed` event and before the job's records go (lane._remove_jobs).
local function lane_release_owners(job, now)
  if job.dedup_id ~= nil then
    local owner = lane_owner(job.dedup_id)
    if owner ~= nil and owner.job_key == job.key then
      lane_owner_delete(job.dedup_id, now)
    end
  end
  if job.repeat_key ~= nil then
    local row = lane_series(job.repeat_key)
    if row ~= nil and row.job_key == job.key then
      lane_series_delete(job.repeat_key)
    end
  end
end

-- A job removed on its own (remove_job, or an owner rule: replace_delayed, upsert,
-- remove_repeat): `removed {prev}`, its owners released, a pending flow child told to its
-- parent (FLOW-26), its records deleted (lane._remove_jobs for one job; a script that may
-- remove a batch's job settles it after this: lane_batch_removed).
local function lane_remove_standalone(job, now)
  lane_emit('removed', job.id, {prev = job.state}, now)
  lane_release_owners(job, now)
  lane_flow_removed({job}, now)
  lane_delete(job)
end

-- ------------------------------------------------------------------- schedule checks

-- The cron matches storing a job of the series `series_key` may need: the successor of
-- its row's owner, and `first` (the job's own schedule) starting it anew.
local function lane_series_needs(series_key, first, now, needs)
  local row = lane_series(series_key)
  if row ~= nil and row.pattern ~= nil then
    needs[#needs + 1] = {row.pattern, row.tz or cjson.null, math.max(tonumber(row.next_at), now)}
    needs[#needs + 1] = {row.pattern, row.tz or cjson.null, now}
  end
  if first ~= nil and lane_given(first.pattern) ~= nil then
    needs[#needs + 1] = {first.pattern, first.tz or cjson.null, now}
  end
end

-- What finishing `job` may need: its series' successor (`completing` only: a terminal
-- failure ends the series) and the series of a next job its dedup owner kept.
local function lane_finish_needs(job, now, needs, completing)
  if completing and job.repeat_key ~= nil then
    local row = lane_series(job.repeat_key)
    if row ~= nil and row.job_key == job.key and row.pattern ~= nil then
      needs[#needs + 1] = {row.pattern, row.tz or cjson.null,
                           math.max(tonumber(row.next_at), now)}
    end
  end
  if job.dedup_id ~= nil then
    local owner = lane_owner(job.dedup_id)
    if owner ~= nil and owner.job_key == job.key and owner.next ~= nil then
      local series = lane_given(cjson.decode(owner.next).series)
      if series ~= nil then
        lane_series_needs(series.key, series, now, needs)
      end
    end
  end
end

-- Takes the client's cron matches (`args.cron`) and checks that every one `needs` lists
-- is there: nil when they are, else the answer asking for the missing ones.
local function lane_ticks_answer(given, needs, now)
  if given ~= nil and given ~= cjson.null then
    LANE_TICKS = given
  end
  local missing = {}
  for _, need in ipairs(needs) do
    local _, absent = lane_cron_next(need[1], need[2], need[3])
    if absent then
      missing[#missing + 1] = need
    end
  end
  if #missing == 0 then
    return nil
  end
  return {lane_ticks = missing, now = now}
end

-- For the finishing scripts (complete, fail, stall), before they write: the cron matches
-- finishing the active jobs `ids` may need (`completing`: they complete), or nil when
-- `args.cron` has them all.
local function lane_finish_ticks(args, ids, now, completing)
  local needs = {}
  for _, id in ipairs(ids) do
    local job = lane_job(id)
    if job ~= nil and job.state == 'active' then
      lane_finish_needs(job, now, needs, completing)
    end
  end
  return lane_ticks_answer(args.cron, needs, now)
end
