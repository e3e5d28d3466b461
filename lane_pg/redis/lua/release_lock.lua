-- lane.release_lock on the lock's key (acquire_lock.lua): the run (queue, id, token) gives
-- the lock up if it holds it; false when it holds nothing.
-- @include json

local args = lane_args()
local lock = redis.call('HMGET', KEYS[1], 'holder_queue', 'holder_id', 'holder_token')
if lock[1] ~= args.queue or lock[2] ~= args.id or lock[3] ~= args.token then
  return lane_result(false)
end
redis.call('DEL', KEYS[1])
return lane_result(true)
