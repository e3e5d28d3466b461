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

-- How many of `want` jobs a claim may take at `now` (RATE-4/7/9): min(want, free slots
-- under max_active, what the rate window has left), and the window the claim is logged
-- under (nil when no rate limit applies). `rate_max` / `rate_ms` are the queue's shared
-- limit, `local_max` / `local_ms` the worker-local one, which wins (RATE-3); nil when
-- unset, as `max_active`. A maxed claim reads no rate capacity (RATE-9).
local function lane_limited_claim(want, rate_max, rate_ms, max_active, local_max, local_ms, now)
  local allowed = want
  if max_active ~= nil then
    allowed = math.min(allowed, max_active - redis.call('ZCARD', lane_key('active')))
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
