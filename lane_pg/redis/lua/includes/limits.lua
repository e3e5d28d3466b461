-- RATE: the limits a claim applies (lane._limited_claim) and the claim log they count in.
-- The queue's settings are meta fields: `rate_max` / `rate_duration_ms` (the shared rate
-- limit), `max_active`, `rate_blocked_until` (epoch ms, rate_limit_claims_for).
-- The claim log is the sorted set `<tag>:claims`: one member per claim that took jobs
-- under a rate limit, `<jobs>:<window_ms>:<token>` (the claim's first lock token makes it
-- unique), scored by the claim's time. A limited claim trims the members older than both
-- its window and their own, so the log holds about one window of claims, never more.
-- @include job

local function lane_claim_log_key()
  return lane_key('claims')
end

-- The value of an optional argument: nil for absent and JSON null alike.
local function lane_given(value)
  if value == cjson.null then
    return nil
  end
  return value
end

-- How many jobs hold a slot under `max_active`: the active index's size, unless that
-- reaches the ceiling, when its members are checked (at most `max_active` live ones) and
-- the stale ones dropped (lane_indexed_job's rule, read lighter: state and key only), so
-- an entry whose job is gone or moved on never holds a slot for good: its lease-expiry
-- score may lie so far ahead that stalled recovery would not meet it for years.
local function lane_active_count(max_active)
  local index = lane_key('active')
  local size = redis.call('ZCARD', index)
  if size < max_active then
    return size
  end
  local live, offset = 0, 0
  while live < max_active do
    local page = redis.call('ZRANGE', index, offset, offset + (max_active - live) - 1)
    if #page == 0 then
      break
    end
    for _, member in ipairs(page) do
      local id = string.sub(member, 18)
      local f = redis.call('HMGET', lane_job_key(id), 'state', 'key')
      if f[1] == 'active' and lane_set_member(f[2], id) == member then
        live = live + 1
        offset = offset + 1
      else
        redis.call('ZREM', index, member)
      end
    end
  end
  return live
end

-- How many of `want` jobs a claim may take at `now` (RATE-4/7/9): min(want, free slots
-- under max_active, what the rate window has left), and the window the claim is logged
-- under (nil when no rate limit applies). `rate_max` / `rate_ms` are the queue's shared
-- limit, `local_max` / `local_ms` the worker-local one, which wins (RATE-3); nil when
-- unset, as `max_active`. A maxed claim reads no rate capacity (RATE-9).
local function lane_limited_claim(want, rate_max, rate_ms, max_active, local_max, local_ms, now)
  local allowed = want
  if max_active ~= nil then
    allowed = math.min(allowed, max_active - lane_active_count(max_active))
  end
  if local_max ~= nil then
    rate_max, rate_ms = local_max, local_ms
  end
  if allowed <= 0 or rate_max == nil or rate_ms == nil then
    return allowed, nil
  end
  local log = lane_claim_log_key()
  local start = now - rate_ms
  local old = redis.call('ZRANGE', log, '-inf', string.format('%d', start), 'BYSCORE',
                        'WITHSCORES')
  for i = 1, #old, 2 do
    local window = tonumber(string.match(old[i], '^%d+:(%d+):'))
    if tonumber(old[i + 1]) <= now - window then
      redis.call('ZREM', log, old[i])
    end
  end
  local used = 0
  for _, member in ipairs(redis.call('ZRANGE', log, string.format('(%d', start), '+inf',
                                                'BYSCORE')) do
    used = used + tonumber(string.match(member, '^(%d+):'))
  end
  return math.min(allowed, rate_max - used), rate_ms
end

-- Logs a claim of `jobs` jobs at `now` under `window_ms`; `token` is one of its tokens.
local function lane_log_claim(now, jobs, window_ms, token)
  redis.call('ZADD', lane_claim_log_key(), now,
             string.format('%d:%d:%s', jobs, window_ms, token))
end
