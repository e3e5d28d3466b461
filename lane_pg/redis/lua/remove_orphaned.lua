-- lane.remove_orphaned (MGMT-22) for one queue's log lines: deletes the lines of the log
-- lists among `ids` whose job is gone, oldest first, at most `limit` lines (as SQL counts
-- rows of lane.job_logs). Redis deletes a job's logs with the job, so these are rare (a
-- job hash deleted by hand); dedup owners, repeat series and flow dependencies are not
-- held on Redis yet. Returns how many lines went.
-- @include json
-- @include job

local args = lane_args()
local removed = 0
for _, id in ipairs(args.ids) do
  local left = args.limit - removed
  if left <= 0 then
    break
  end
  if redis.call('EXISTS', lane_job_key(id)) == 0 then
    local logs = lane_key('logs:' .. id)
    local lines = redis.call('LLEN', logs)
    if lines <= left then
      redis.call('DEL', logs)
      removed = removed + lines
    else
      redis.call('LTRIM', logs, left, -1)
      removed = removed + left
    end
  end
end
return lane_result(removed)
