-- lane.drain_jobs (MGMT-17): removes the queue's waiting jobs and, with `delayed`, its
-- delayed ones, all chosen before any goes; active, waiting-children and finished jobs
-- stay, and so does a series' owner occurrence (REP-16). A queue that does not exist stays
-- so (nothing is written). Returns how many went.
-- @include json
-- @include now
-- @include cleanup

local args = lane_args()
local now = lane_now(args.now)
local ids = lane_removable('waiting', nil, nil, now)
if args.delayed then
  lane_extend(ids, lane_removable('delayed', nil, nil, now))
end
return lane_result(lane_remove_ids(ids, now))
