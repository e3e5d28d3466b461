-- lane.update_job_priority (MGMT-9): stores a job's priority (and its LIFO flag when given,
-- on the options too). A waiting job is requeued in its new position with a fresh
-- sequence; in another state the order key keeps the priority it was built with (as
-- PostgreSQL's order_key column does), so the job keeps that one in `order_priority` until
-- its next move into waiting (lane_enqueue clears it). No event. The client has checked
-- the priority. Returns [status, job]: 'ok' or 'not_found'.
-- @include json
-- @include json_key
-- @include manage

local args = lane_args()
local job = lane_job(args.id)
if job == nil then
  return lane_result({'not_found'})
end
local fields = {priority = args.priority}
if args.lifo ~= nil and args.lifo ~= cjson.null then
  fields.lifo = args.lifo and '1' or '0'
  fields.options = lane_json_set_key(job.options, 'lifo', args.lifo and 'true' or 'false')
end
if job.state == 'waiting' then
  lane_unindex(job)
  lane_job_set(job, fields)
  lane_enqueue(job)
else
  if job.order_priority == nil then
    fields.order_priority = job.priority
  end
  lane_job_set(job, fields)
end
return lane_result({'ok', job})
