-- lane.reschedule_job (MGMT-5): a delayed job due at now + delay_ms, its stored
-- options.delay_ms following (not on a repeat occurrence: its schedule is its delay, and
-- its options are its series' template), event `delayed {delay}`. The client has checked
-- delay_ms (not negative). Returns [status, job] as promote_job.lua.
-- @include json
-- @include now
-- @include json_key
-- @include manage

local args = lane_args()
local now = lane_now(args.now)
local job = lane_job(args.id)
if job == nil then
  return lane_result({'not_found'})
end
if job.state ~= 'delayed' then
  return lane_result({'conflict', job.state})
end
local due = now + args.delay_ms
local fields = {available_at = due}
if job.repeat_key == nil then
  fields.options = lane_json_set_key(job.options, 'delay_ms', string.format('%d', args.delay_ms))
end
lane_job_set(job, fields)
lane_index(job, due)  -- the same member, its score now the new due time
lane_emit('delayed', job.id, {delay = due}, now)
lane_wake_at(due)
return lane_result({'ok', job})
