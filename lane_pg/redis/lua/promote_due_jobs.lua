-- lane.promote_due_jobs for one queue (MGMT-4): every delayed job due at `now` (due time
-- <= now) to waiting, by (due time, key), each with a fresh sequence and `waiting {prev:
-- delayed}`; the queue's claimers are woken when any moved. Returns how many moved.
-- @include json
-- @include now
-- @include events

local args = lane_args()
local now = lane_now(args.now)
local due = redis.call('ZRANGE', lane_key('delayed'), '-inf', now, 'BYSCORE')
local moved = 0
for _, member in ipairs(due) do
  local job = lane_indexed_job('delayed', member)  -- nil: a stale member, dropped
  if job ~= nil then
    lane_unindex(job)
    lane_enqueue(job)
    lane_emit('waiting', job.id, {prev = 'delayed'}, now)
    moved = moved + 1
  end
end
if moved > 0 then
  lane_wake()
end
return lane_result(moved)
