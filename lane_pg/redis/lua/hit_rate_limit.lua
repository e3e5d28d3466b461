-- lane.hit_rate_limit on the limiter's own key (KEYS[1] = `{prefix:limiter:<key>}`, a
-- hash: window_start, hits, failures, blocked_until, updated_at, shared with the throttle
-- as lane.limiters' row is): one hit on the fixed window of `max` hits per `decay_ms`,
-- starting at its first hit. A refused hit is counted too, capped at max + 1. Returns nil
-- (cjson null) when granted, else the milliseconds until the window ends (at least 1).
-- @include json
-- @include now

local args = lane_args()
local now = lane_now(args.now)
local state = redis.call('HMGET', KEYS[1], 'window_start', 'hits')
local start, hits = tonumber(state[1]), tonumber(state[2])
if start == nil or start + args.decay_ms <= now then
  start, hits = now, 1
else
  hits = math.min(hits + 1, args.max + 1)
end
redis.call('HSET', KEYS[1], 'window_start', string.format('%d', start), 'hits', hits,
           'updated_at', string.format('%d', now))
if hits <= args.max then
  return lane_result(cjson.null)
end
return lane_result(math.max(start + args.decay_ms - now, 1))
