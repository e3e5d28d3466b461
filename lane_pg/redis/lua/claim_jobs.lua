-- lane.claim_jobs for one queue (the client visits a claim's queues in order, one call
-- each, since each queue is its own cluster slot): promotes every due delayed job first,
-- even when the queue is paused (CLAIM-3, PAUSE-12), then moves up to `limit` waiting jobs
-- to active in claim order, each under a fresh token (lane_token), with
-- `active {prev: waiting}`. Returns {jobs, next_due}: the claimed jobs in claim order and
-- the due time of the earliest delayed job left (nil when none), which an idle claimer
-- sleeps until. Limits (includes/limits.lua): a queue blocked by rate_limit_claims_for
-- yields nothing (RATE-6); under max_active or a rate limit (`rate_max` / `rate_ms`, the
-- worker-local one, else the queue's) the claim takes min(limit, free slots, rate
-- capacity), nothing at all when maxed, and logs what it took under a rate limit.
-- @include json
-- @include now
-- @include events
-- @include limits

local args = lane_args()
local now = lane_now(args.now)
local result = {jobs = {}, next_due = cjson.null}

-- The lock token of the i-th job claimed: the client's fresh UUID `token_seed` with its
-- last 8 hex digits counted up by i - 1 (mod 2^32), so the tokens of one call differ and
-- those of two calls share at most the chance of two random 90-bit prefixes being equal.
-- The client used to send one uuid4 per slot asked for: 50 on every claim of a worker of
-- concurrency 50, 180 us of its CPU (measured, timeit) on the wake-up path of one job.
local function lane_token(i)
  local seed = args.token_seed
  local low = (tonumber(string.sub(seed, 29), 16) + i - 1) % 4294967296
  return string.sub(seed, 1, 28) .. string.format('%08x', low)
end

local function next_due()
  local first = redis.call('ZRANGE', lane_key('delayed'), 0, 0, 'WITHSCORES')
  if #first == 0 then
    return cjson.null
  end
  return tonumber(first[2])
end

if redis.call('EXISTS', KEYS[1]) == 0 then
  return lane_result(result)
end

-- Due delayed jobs to waiting, by (due time, key), waking no one (CLAIM-3).
local due = redis.call('ZRANGE', lane_key('delayed'), '-inf', now, 'BYSCORE')
for _, member in ipairs(due) do
  local job = lane_indexed_job('delayed', member)  -- nil: a stale member, dropped
  if job ~= nil then
    lane_unindex(job)
    lane_enqueue(job)
    lane_emit('waiting', job.id, {prev = 'delayed'}, now)
  end
end

-- The pause flags and the limits in one read (a plain queue has none of the limits).
local meta = redis.call('HMGET', KEYS[1], 'paused', 'paused_all', 'rate_max',
                        'rate_duration_ms', 'max_active', 'rate_blocked_until')
local is_paused = meta[1] == '1' or meta[2] == '1'
if args.pause_as_paused ~= nil and args.pause_as_paused ~= cjson.null then
  is_paused = args.pause_as_paused or meta[2] == '1'
end
if is_paused and not args.ignore_pause then
  result.next_due = next_due()
  return lane_result(result)
end

-- RATE-6, then RATE-4/7/9: a job not taken keeps its state and attempts.
if meta[6] and tonumber(meta[6]) > now then
  result.next_due = next_due()
  return lane_result(result)
end
local limit = args.limit
local window_ms = nil
local capped = false
local local_max = lane_given(args.rate_max)
if meta[3] or meta[5] or local_max ~= nil then
  local allowed
  allowed, window_ms = lane_limited_claim(limit, tonumber(meta[3]), tonumber(meta[4]),
                                          tonumber(meta[5]), local_max,
                                          lane_given(args.rate_ms), now)
  capped = allowed < limit
  limit = math.max(allowed, 0)
end
if limit > 0 then
  local expires = now + args.lease_ms
  local members = {}  -- the claimed jobs' members
  -- A stale member (lane_indexed_job drops it) is no claim: read on until `limit` jobs
  -- are taken or the index is empty.
  while #members < limit do
    local head = redis.call('ZRANGE', lane_key('waiting'), 0, limit - #members - 1)
    if #head == 0 then
      break
    end
    for _, member in ipairs(head) do
      local job = lane_indexed_job('waiting', member)
      if job ~= nil then
        local i = #members + 1
        members[i] = member
        lane_unindex(job)
        lane_job_set(job, {state = 'active', lock_token = lane_token(i),
                           worker_id = args.worker_id, processed_at = now,
                           lease_expires_at = expires,
                           attempts_started = lane_job_count(job, 'attempts_started') + 1})
        lane_index(job, expires)
        lane_emit('active', job.id, {prev = 'waiting'}, now)
        result.jobs[i] = job
      end
    end
  end
  if window_ms ~= nil and #members > 0 then
    lane_log_claim(now, #members, window_ms, lane_token(1))
  end
  -- BZPOPMIN woke one claimer: wake the next while jobs are left (PostgreSQL's NOTIFY
  -- reaches every listener at once), unless the limits stopped this claim short: the next
  -- would find the same limit.
  if #members > 0 and not capped and redis.call('ZCARD', lane_key('waiting')) > 0 then
    lane_wake_unchecked()
  end
end
result.next_due = next_due()
if #result.jobs == 0 then
  result.jobs = cjson.null  -- cjson writes an empty table as {}; the client reads null as []
end
return lane_result(result)
