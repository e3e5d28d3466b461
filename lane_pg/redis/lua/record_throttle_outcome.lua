-- lane.record_throttle_outcome on the limiter's key (hit_rate_limit.lua): a success resets
-- the count of consecutive failures; a failure adds one, and the `max`-th in a row opens
-- the throttle until now + decay_ms (blocked_until) and starts the count again from 0.
-- Returns true when this outcome opened it.
-- @include json
-- @include now

local args = lane_args()
local now = lane_now(args.now)
local stamp = string.format('%d', now)
local failures = tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')
if not args.failed then
  if failures > 0 then
    redis.call('HSET', KEYS[1], 'failures', 0, 'updated_at', stamp)
  end
  return lane_result(false)
end
if failures + 1 >= args.max then
  redis.call('HSET', KEYS[1], 'failures', 0,
             'blocked_until', string.format('%d', now + args.decay_ms), 'updated_at', stamp)
  return lane_result(true)
end
redis.call('HSET', KEYS[1], 'failures', failures + 1, 'updated_at', stamp)
return lane_result(false)
