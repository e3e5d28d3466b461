-- lane.list_workers' rows on the workers' keys (worker_heartbeat.lua), read at one instant:
-- the workers whose last heartbeat is at or after `oldest` (epoch ms), each as [id, info
-- JSON text, started_at, heartbeat_at]. The client orders them and marks the leader.
-- @include json

local args = lane_args()
local tag = string.sub(KEYS[1], 1, -6)
local live = redis.call('ZRANGE', tag .. ':heartbeats', args.oldest, '+inf', 'BYSCORE',
                        'WITHSCORES')
local out = {}
for i = 1, #live, 2 do
  local id = live[i]
  local info = redis.call('HGET', KEYS[1], id)
  if info then
    out[#out + 1] = {id, info, redis.call('HGET', tag .. ':started', id), live[i + 1]}
  end
end
if #out == 0 then
  return '[]'
end
return lane_result(out)
