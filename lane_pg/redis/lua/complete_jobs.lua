-- lane.complete_jobs for one queue's items [id, token, result JSON text]: each item active
-- under its token completes (FIN-1); any other is reported and left unchanged, as is a
-- flow parent still waiting for a child (FIN-8: 'pending_dependencies'). Returns,
-- per item, [status, state, job?] (the job only with `want_jobs`, for complete_job).
-- @include json
-- @include now
-- @include finish

local args = lane_args()
local now = lane_now(args.now)
local ids = {}
for i, item in ipairs(args.items) do
  ids[i] = item[1]
end
local needs = lane_finish_ticks(args, ids, now, true)  -- cron matches (owners.lua)
if needs ~= nil then
  return lane_result(needs)
end
local out = {}
for i, item in ipairs(args.items) do
  local job, refused = lane_owned(item[1], item[2])
  if job == nil then
    out[i] = {refused}
  elseif lane_blocked_by_children(job) then  -- FIN-8: still held, still active
    out[i] = {'pending_dependencies', false, false, tonumber(job.deps_pending),
              job.deferred_failure or false}
  else
    local snapshot = lane_complete(job, item[3], now)
    out[i] = {'ok', 'completed', args.want_jobs and snapshot or nil}
  end
end
return lane_result(out)
