-- lane.recover_stalled for one queue (STALL-1..3, STALL-6): every active job whose lease
-- expired before `now` (strictly), in key order. The active index is scored by lease
-- expiry, so the expired jobs are one range read; the lease is authoritative, as in
-- PostgreSQL (one pass, no candidate set). Each gets stalled_count + 1 and `stalled
-- {reason}`; within `max_stalled_count` it goes back to waiting at its normal position
-- (`waiting {prev: active}`, claimers woken), past it it fails for good with the stalled
-- reason (lane_fail_terminal: `failed`, its dedup owner and series released, retention,
-- metrics, `drained`), unless it owns its repeat series: that one is requeued whatever
-- its count, since failing it would end the schedule (STALL-5). The lost run stays counted
-- in attempts_started (STALL-6). Before any write, the cron matches a kept next job's
-- series may need are asked for (lane_finish_ticks: {lane_ticks, now}, the client's
-- call_scheduled answers). Returns [[id, state], ...] in key order.
-- @include json
-- @include now
-- @include finish

local LANE_STALLED_REASON = 'job stalled more than allowable limit'

local args = lane_args()
local now = lane_now(args.now)
local expired = redis.call('ZRANGE', lane_key('active'), '-inf', string.format('(%d', now),
                           'BYSCORE')
table.sort(expired)  -- members are '<key, 16 digits>:<id>': key order
local ids = {}
for i, member in ipairs(expired) do
  ids[i] = string.sub(member, 18)
end
local asked = lane_finish_ticks(args, ids, now, false)
if asked ~= nil then
  return lane_result(asked)
end

-- STALL-5: the occurrence its series names.
local function lane_owns_its_series(job)
  if job.repeat_key == nil then
    return false
  end
  local row = lane_series(job.repeat_key)
  return row ~= nil and row.job_key == job.key and lane_series_owner(job.repeat_key, row) ~= nil
end

local function lane_fails(job)
  return lane_job_count(job, 'stalled_count') + 1 > args.max_stalled_count
         and not lane_owns_its_series(job)
end

local out = {}
local woken = false
local function recover(job)
  local fails = lane_fails(job)
  lane_job_set(job, {stalled_count = lane_job_count(job, 'stalled_count') + 1})
  lane_emit('stalled', job.id, {reason = 'lease expired'}, now)
  if not fails then
    lane_unindex(job)
    lane_end_lease(job)
    lane_enqueue(job)
    lane_emit('waiting', job.id, {prev = 'active'}, now)
    woken = true
  else
    lane_fail_terminal(job, LANE_STALLED_REASON, now)
  end
  out[#out + 1] = {job.id, job.state}
end

for _, member in ipairs(expired) do
  -- nil: an entry whose job is gone or moved on (never written so), dropped, not revived
  local job = lane_indexed_job('active', member)
  if job ~= nil then
    recover(job)
  end
end
if woken then
  lane_wake()
end
if #out == 0 then
  return '[]'
end
return lane_result(out)
