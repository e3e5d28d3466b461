-- The writes of a queue's settings (fields of its meta hash), one script for the family of
-- near-identical operations lane.set_queue_retention, set_queue_events,
-- set_claim_rate_limit, clear_claim_rate_limit, rate_limit_claims_for,
-- clear_claim_rate_limit_key, set_max_active_jobs and clear_max_active_jobs. Arguments:
--   set            field -> text to store
--   clear          fields to delete
--   block_ms       store rate_blocked_until = now + block_ms (RATE-6)
--   forget_claims  delete the claim log (limits.lua)
--   create         create the queue when missing; without it a missing queue is left alone
--   wake           'always', or 'changed' (only when a cleared field was set): wake the
--                  queue's idle claimers, whom a new limit may let claim now
-- No event is written (a setting is not a job's transition).
-- @include json
-- @include now
-- @include events
-- @include limits

local args = lane_args()
local now = lane_now(args.now)
if redis.call('EXISTS', KEYS[1]) == 0 then
  if not args.create then
    return lane_result(cjson.null)
  end
  lane_ensure_queue(now)
end
local changed = false
if args.clear and #args.clear > 0 then
  changed = redis.call('HDEL', KEYS[1], unpack(args.clear)) > 0
end
local fields = {}
for name, value in pairs(args.set or {}) do
  fields[#fields + 1] = name
  fields[#fields + 1] = value
end
if args.block_ms then
  fields[#fields + 1] = 'rate_blocked_until'
  fields[#fields + 1] = string.format('%d', now + args.block_ms)
end
if #fields > 0 then
  redis.call('HSET', KEYS[1], unpack(fields))
end
if args.forget_claims then
  redis.call('DEL', lane_claim_log_key())
end
if args.wake == 'always' or (args.wake == 'changed' and changed) then
  lane_wake()
end
return lane_result(cjson.null)
