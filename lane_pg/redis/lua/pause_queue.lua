-- lane.pause_queue and lane.resume_queue, one script (`paused` says which): sets the
-- queue's own flag (meta `paused` '1') or deletes it, creating the queue when missing
-- (a `paused` of '0', which earlier versions wrote on resume, reads as resumed), and writes
-- `paused` or `resumed` (PAUSE-1); a resume wakes the queue's idle claimers. Adds and
-- promotion go on while paused: only claim_jobs.lua reads the flag. The connection-wide
-- pause is pause_all.lua's field, `paused_all`.
-- @include json
-- @include now
-- @include events

local args = lane_args()
local now = lane_now(args.now)
lane_ensure_queue(now)
if args.paused then
  redis.call('HSET', KEYS[1], 'paused', '1')
  lane_emit('paused', nil, nil, now)
else
  redis.call('HDEL', KEYS[1], 'paused')
  lane_emit('resumed', nil, nil, now)
  lane_wake()
end
return lane_result(cjson.null)
