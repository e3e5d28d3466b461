-- lane.clear_queues (A16) for one queue (a script touches one queue's keys: the client
-- calls it per queue, in name order): its waiting-children jobs, then what
-- drain_jobs(delayed) removes, then what clean_jobs('active', grace 0) removes, with its
-- `cleaned {count}` (which creates the queue, as a clean does). Never a validly leased job
-- or a finished one. All chosen and checked before any goes. Returns how many went.
-- @include json
-- @include now
-- @include cleanup

local args = lane_args()
local now = lane_now(args.now)
local parents = redis.call('ZRANGE', lane_key('waiting-children'), 0, -1)
for i, member in ipairs(parents) do
  parents[i] = lane_index_id('waiting-children', member)
end
local drained = lane_removable('waiting', nil, nil, now)
lane_extend(drained, lane_removable('delayed', nil, nil, now))
local expired = lane_removable('active', now, nil, now)
local total = lane_remove_ids(parents, now) + lane_remove_ids(drained, now)
lane_ensure_queue(now)
local cleaned = lane_remove_ids(expired, now)
lane_emit('cleaned', nil, {count = cleaned}, now)
return lane_result(total + cleaned)
