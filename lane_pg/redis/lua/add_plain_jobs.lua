-- lane.add_jobs for a call whose specs are all plain: no custom id, no deduplication, no
-- repeat (the client picks this script then, else add_jobs.lua). Such a spec always stores
-- one new job, so what add_jobs' add path does one spec at a time is done for the whole
-- call: the job keys, the waiting sequences and the event ids are reserved with one INCRBY
-- each, and each index takes its members in one ZADD. Same records, order, events and
-- answer as add_jobs.lua ({now, jobs}, a job as lane_added_answer), with none of the
-- owners' code: a one-job add ran 105 us of script time against a 57 us floor (the same
-- commands without the logic; INFO commandstats, min of 7 x 500), a 1,000-job add 55 us a
-- job against 38 (8 commands a job, 3 here).
-- Where a one-job add's script time goes (2026-12-05, EVALSHA usec_per_call, min of 5 x
-- 3,000, the script cut short at each step): an empty script 2.4 us, this script's function
-- definitions +4.5, decoding the arguments +2.4, TIME and the meta HSETNX +3.9, the INCRBYs
-- +1.5, building and writing the job (lane_new_job, HSET, ZADD) +17.6, the two events +7.6,
-- the wake-up +3, the answer +1.5: 41-44 us against BullMQ's addStandardJob 19 us.
-- Since (2026-12-06): four default fields unset, no JSON nulls sent, one meta HMGET for
-- three reads: 28.8 -> 26.4 us pipelined, 33-35 us one call at a time (commandstats, min of
-- 7 x 1,500), where BullMQ's runs 18.8 with 8 commands to our 10. The same commands in one
-- straight script without these functions ran 24.2: the rest is the shared builders
-- (lane_new_job and lane_write_new 3.3 us of it); the job's 14-field HSET alone is ~6 us.
-- @include json
-- @include now
-- @include store

local LANE_ZADD_CHUNK = 500  -- members per ZADD (unpack's stack stays small)

local function lane_zadd_all(key, pairs_)
  for from = 1, #pairs_, 2 * LANE_ZADD_CHUNK do
    redis.call('ZADD', key, unpack(pairs_, from, math.min(from + 2 * LANE_ZADD_CHUNK - 1,
                                                           #pairs_)))
  end
end

local args = lane_args()
local now = lane_now(args.now)
local specs = args.specs
local held = lane_open_queue(now)

local count, waiting = #specs, 0
for _, spec in ipairs(specs) do
  if spec.delay_ms <= 0 then
    waiting = waiting + 1
  end
end
local key = redis.call('INCRBY', lane_key('ids'), count) - count
local seq = 0
if waiting > 0 then
  seq = redis.call('INCRBY', lane_key('seq'), waiting) - waiting
end

local added, jobs, ready, later = {}, {}, {}, {}
local min_due = nil
for i, spec in ipairs(specs) do
  key = key + 1
  local id = string.format('%d', key)
  local due = now + spec.delay_ms
  local job
  if due > now then
    job = lane_new_job(spec, id, id, due, now)
    later[#later + 1] = due
    later[#later + 1] = lane_set_member(job.key, job.id)
    if min_due == nil or due < min_due then
      min_due = due
    end
  else
    seq = seq + 1
    job = lane_new_job(spec, id, id, due, now, seq)
    ready[#ready + 1] = 0
    ready[#ready + 1] = job.wm
  end
  lane_write_new(job)
  added[i] = job
  jobs[i] = lane_added_answer(i, job)
end
lane_zadd_all(lane_key('waiting'), ready)
lane_zadd_all(lane_key('delayed'), later)

if lane_records_events() then
  local first_event = redis.call('INCRBY', lane_key('event_id'), 2 * count) - 2 * count + 1
  if count == 1 and waiting == 1 then
    lane_emit_added_waiting(added[1].id, added[1].name, now, first_event)
  else
    lane_added_events(added, now, first_event)
  end
end

if waiting > 0 then
  lane_wake(held)
elseif min_due ~= nil then
  lane_wake_at(min_due)
end
return lane_result({now = string.format('%d', now), jobs = jobs})
