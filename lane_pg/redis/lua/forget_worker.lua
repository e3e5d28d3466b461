-- lane.forget_worker on the workers' keys (worker_heartbeat.lua): deletes the worker;
-- false when there was none.
-- @include json

local args = lane_args()
local tag = string.sub(KEYS[1], 1, -6)
redis.call('HDEL', tag .. ':started', args.id)
redis.call('ZREM', tag .. ':heartbeats', args.id)
return lane_result(redis.call('HDEL', KEYS[1], args.id) == 1)
