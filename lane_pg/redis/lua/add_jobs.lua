-- lane.add_jobs (and add_job, a call of one spec): stores new jobs in input order (ADD-1..13,
-- DEDUP-1..20, REP-1..6) through the add path (includes/add.lua). The client has checked
-- every spec (lane_pg.options) and sends each one's stored fields. Nothing is written when
-- a spec meets another push's reservation or a series with no occurrence left
-- ({error, message}), or when a cron match the call needs is not in `args.cron`
-- ({lane_ticks, now}: the client computes them and calls again). Returns {now, jobs}: each
-- spec's job in input order, a job this call stored as {spec index, id, state,
-- order_offset, seq | false, available_at} (the client has the rest: it sent it), a job
-- already stored (a duplicate) as its whole hash. Encoding every new job's hash here and
-- decoding it in Python cost 20 % of a 1,000-job add_jobs (py-spy, job_row).
-- @include json
-- @include now
-- @include add

local args = lane_args()
local now = lane_now(args.now)
local refused = lane_add_check(args, args.specs, now)
if refused ~= nil then
  return lane_result(refused)
end
lane_ensure_queue(now)
local results, _, origin = lane_add_specs(args.specs, now)
local jobs = {}
for i, job in ipairs(results) do
  local from = job ~= false and origin[job] or nil
  if from ~= nil then
    jobs[i] = lane_added_answer(from, job)
  else
    jobs[i] = job
  end
end
return lane_result({now = string.format('%d', now), jobs = jobs})
