-- lane.recover_stalled for one queue (STALL-1..3, STALL-6): every active job whose lease
-- expired before `now` (strictly), in key order. The active index is scored by lease
-- expiry, so the expired jobs are one range read; the lease is authoritative, as in
-- PostgreSQL (one pass, no candidate set). Each gets stalled_count + 1 and `stalled
-- {reason}`; within `max_stalled_count` it goes back to waiting at its normal position
-- (`waiting {prev: active}`, claimers woken), past it it fails for good with the stalled
-- reason (lane_fail_terminal: `failed`, retention, metrics, `drained`). The lost run stays
-- counted in attempts_started (STALL-6). Returns [[id, state], ...] in key order.
-- @include json
-- @include now
-- @include finish

local LANE_STALLED_REASON = 'job stalled more than allowable limit'

local args = lane_args()
local now = lane_now(args.now)
local expired = redis.call('ZRANGE', lane_key('active'), '-inf', '(' .. now, 'BYSCORE')
table.sort(expired)  -- members are '<key, 16 digits>:<id>': key order
local out = {}
local woken = false
local function recover(job)
  local stalled = tonumber(job.stalled_count) + 1
  if stalled > args.max_stalled_count then
    lane_check_plain(job)  -- refuse before this job's first write (a script is no transaction)
  end
  lane_job_set(job, {stalled_count = stalled})
  lane_emit('stalled', job.id, {reason = 'lease expired'}, now)
  if stalled <= args.max_stalled_count then
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
  local job = lane_job(string.sub(member, 18))
  if job == nil then  -- an index entry without its job (never written so): drop it
    redis.call('ZREM', lane_key('active'), member)
  else
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
