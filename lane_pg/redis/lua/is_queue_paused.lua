-- lane.is_queue_paused: whether the queue's own flag (meta `paused`) is '1'. A `paused` of
-- '0', which earlier versions wrote on resume, reads as resumed and is deleted here, so a
-- resumed queue carries no flag.
-- @include json

local flag = redis.call('HGET', KEYS[1], 'paused')
if flag == '0' then
  redis.call('HDEL', KEYS[1], 'paused')
end
return lane_result(flag == '1')
