-- lane.worker_heartbeat on the workers' keys (KEYS[1] = `{prefix:workers}:info`, a hash of
-- worker id -> the JSON text of {hostname, pid, queues, meta} the client built; beside it,
-- under the same tag, `:started` (id -> first heartbeat, epoch ms) and `:heartbeats`, a
-- sorted set of ids scored by their last heartbeat). Creates or refreshes the worker,
-- then forgets every worker silent for an hour.
-- @include json
-- @include now

local FORGOTTEN_AFTER_MS = 3600000
local args = lane_args()
local now = lane_now(args.now)
local tag = string.sub(KEYS[1], 1, -6)  -- KEYS[1] minus ':info'
local started, beats = tag .. ':started', tag .. ':heartbeats'
redis.call('HSET', KEYS[1], args.id, args.info)
redis.call('HSETNX', started, args.id, string.format('%d', now))
redis.call('ZADD', beats, now, args.id)
local silent = redis.call('ZRANGE', beats, '-inf', '(' .. (now - FORGOTTEN_AFTER_MS), 'BYSCORE')
for _, id in ipairs(silent) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', started, id)
  redis.call('ZREM', beats, id)
end
return lane_result(true)
