-- lane.cancel_batch (sql/functions/19_batches.sql) on the batch's home queue (KEYS[1]):
-- marks it cancelled (its jobs skip themselves through the SkipIfBatchCancelled
-- middleware); with `remove_waiting` its jobs not started yet (waiting, delayed) are
-- removed as remove_job removes one, each settled as deleted, so the batch can finish.
-- Returns ['not_found'] or ['ok', whether this call cancelled it].
-- @include json
-- @include now
-- @include batches

local args = lane_args()
local now = lane_now(args.now)
local id = args.id
local batch = lane_batch(id)
if batch == nil then
  return lane_result({'not_found'})
end
local cancelled = batch.cancelled_at == nil
if cancelled then
  redis.call('HSET', lane_batch_key(id), 'cancelled_at', string.format('%d', now))
end

local function remove_unstarted(job_id)
  local job = lane_job(job_id)
  if job ~= nil and job.batch_id == id and (job.state == 'waiting' or job.state == 'delayed') then
    lane_remove_standalone(job, now)
    lane_batch_removed(job, now)
  end
end

if args.remove_waiting then
  for _, member in ipairs(redis.call('LRANGE', lane_batch_key(id, 'jobs'), 0, -1)) do
    local space = string.find(member, ' ', 1, true)
    lane_in(string.sub(member, 1, space - 1), remove_unstarted,
                string.sub(member, space + 1))
  end
end
return lane_result({'ok', cancelled})
