-- lane.pause_all and lane.resume_all on one queue, one script (`paused` says which). The
-- switch itself lives in the settings hash `{prefix}:settings`, in another slot than any
-- queue, so the client flips it and then calls this script on every queue of the set
-- `{prefix}:queues` (and on a queue it registers while the switch was ever used). Each flip
-- bumps the switch's generation, `epoch`; a queue keeps the value of the latest generation
-- it was told (meta `paused_all`, `paused_all_epoch`) and ignores an older one, so a
-- registration that read the switch just before a flip cannot undo it, in whatever order
-- the two calls arrive. With `wake`, a queue the switch held back wakes its claimers.
-- Returns whether the value was taken.
-- @include json
-- @include events

local args = lane_args()
local held = redis.call('HMGET', KEYS[1], 'paused_all', 'paused_all_epoch')
if tonumber(held[2] or '0') > args.epoch then
  return lane_result(false)
end
redis.call('HSET', KEYS[1], 'paused_all', args.paused and '1' or '0',
           'paused_all_epoch', string.format('%d', args.epoch))
if args.wake and not args.paused and held[1] == '1' then
  lane_wake()
end
return lane_result(true)
