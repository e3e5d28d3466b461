-- lane.acquire_lock on the lock's own key (KEYS[1] = `{prefix:lock:<key>}`, a hash: the
-- holder's run holder_queue, holder_id, holder_key, holder_token, and acquired_at,
-- expires_at). The caller's run (queue, id, job_key, token) was checked active by the
-- client. It takes the lock when the key is free, expired (expires_at <= now), or held by
-- the run the client found over (`dead`: that run's token; a run never becomes active
-- again under its token, so the finding stays true), and renews it for its own holder.
-- Otherwise it returns the holder for the client to check: the holder's job lies in
-- another cluster slot, out of this script's reach. Returns ['ok'] or ['held', queue, id,
-- job_key, token].
-- @include json
-- @include now

local args = lane_args()
local now = lane_now(args.now)
local until_ms = string.format('%d', now + args.ttl_ms)
local lock = redis.call('HMGET', KEYS[1], 'holder_queue', 'holder_id', 'holder_key',
                        'holder_token', 'expires_at')
local function take()
  redis.call('HSET', KEYS[1], 'holder_queue', args.queue, 'holder_id', args.id,
             'holder_key', args.job_key, 'holder_token', args.token,
             'acquired_at', string.format('%d', now), 'expires_at', until_ms)
  return lane_result({'ok'})
end
if not lock[1] then
  return take()
end
if lock[1] == args.queue and lock[2] == args.id and lock[3] == args.job_key
   and lock[4] == args.token then
  redis.call('HSET', KEYS[1], 'expires_at', until_ms)
  return lane_result({'ok'})
end
if tonumber(lock[5]) <= now or (args.dead ~= nil and args.dead ~= cjson.null
                                 and args.dead == lock[4]) then
  return take()
end
return lane_result({'held', lock[1], lock[2], lock[3], lock[4]})
