-- lane.release_job, lane.delay_job and lane.give_back_job: a held job back to waiting at
-- the front of its priority (`release`; processed_at cleared) or to delayed at now +
-- delay_ms, its lock cleared; `give_back` also returns the claim's attempt
-- (attempts_started - 1, never below 0). Returns [status, job].
-- @include json
-- @include now
-- @include finish

local args = lane_args()
local now = lane_now(args.now)
local job, refused = lane_owned(args.id, args.token)
if job == nil then
  return lane_result({refused})
end
lane_unindex(job)
lane_end_lease(job)
if args.give_back then
  lane_job_set(job, {attempts_started = math.max(lane_job_count(job, 'attempts_started') - 1, 0)})
end
if args.release then
  lane_job_set(job, {processed_at = false})
  lane_enqueue(job, 'front')
  lane_emit('waiting', job.id, {prev = 'active'}, now)
  lane_wake()
else
  local due = now + args.delay_ms
  lane_job_set(job, {state = 'delayed', available_at = due})
  lane_index(job, due)
  lane_emit('delayed', job.id, {delay = due, prev = 'active'}, now)
  lane_wake_at(due)
end
return lane_result({'ok', job})
