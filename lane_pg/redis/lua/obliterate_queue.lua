-- lane.obliterate_queue (MGMT-21), in bounded steps: the client calls this script until it
-- answers 'done', so no call blocks the server for the whole of a large queue. The first
-- step (`first`) pauses the queue as lane.pause_queue does (creating it, `paused`); with an
-- active job and no `force` it stops there, answering {'active'}: the queue stays paused,
-- its active jobs drain, a later call succeeds. Each step then deletes up to `chunk` jobs
-- of any state (hash, index entry, logs; no `removed` events: the stream goes with the
-- queue, as lane.obliterate_queue deletes the events its removals wrote). The step that
-- finds every index empty deletes the queue's own keys, so the queue no longer exists; a
-- job added between steps (the queue is paused, adds are not) goes in a later step.
-- The dedup owners and series go too: each job's with it, and in the last step the rows
-- left naming no job (a TTL owner, a reservation: the members of `dedup-expiry`; an owner
-- without a TTL names a job, released with it) and every series of `repeats`.
-- Not deleted: the counters of job keys (`ids`) and event ids (`event_id`), so a new queue
-- of this name never reuses an id (PostgreSQL's sequences are global: a subscriber's
-- resume point or a failed-job record never names a newer job or event). Returns
-- {'more' | 'done', jobs deleted by this step}.
-- @include json
-- @include now
-- @include cleanup

-- Every key of a queue that is not one job's own (job:<id>, logs:<id>), the two counters
-- above excepted: a new key of the queue goes here, or obliterate leaves it behind
-- (tests/redis/test_cleanup.py checks that no key of an obliterated queue is left).
local LANE_QUEUE_KEYS = {
  'meta', 'events', 'seq', 'marker', 'metrics:completed', 'metrics:failed',
  'waiting', 'delayed', 'active', 'waiting-children', 'completed', 'failed',
  'dedup-expiry', 'repeats', 'claims',
}
local LANE_STATES = {'waiting', 'delayed', 'active', 'waiting-children', 'completed', 'failed'}

local args = lane_args()
local now = lane_now(args.now)
if args.first then
  lane_ensure_queue(now)
  redis.call('HSET', KEYS[1], 'paused', '1')
  lane_emit('paused', nil, nil, now)
  if not args.force and redis.call('ZCARD', lane_key('active')) > 0 then
    return lane_result({'active'})
  end
end

-- This step's jobs: up to `chunk`, the indexes in turn.
local doomed, ids = {}, {}
for _, state in ipairs(LANE_STATES) do
  local room = args.chunk - #ids
  if room <= 0 then
    break
  end
  for _, member in ipairs(redis.call('ZRANGE', lane_key(state), 0, room - 1)) do
    local id = lane_index_id(state, member)
    ids[#ids + 1] = id
    doomed[#doomed + 1] = {state, member, id}
  end
end
local jobs = {}
for _, job in ipairs(doomed) do
  local found = lane_job(job[3])
  if found ~= nil then
    jobs[#jobs + 1] = found
    LANE_REMOVING[LANE_TAG .. '\n' .. found.key] = true
  end
end
for _, job in ipairs(jobs) do
  lane_release_owners(job, now)
end
lane_flow_removed(jobs, now)  -- FLOW-26: a parent in another queue is told
for _, job in ipairs(jobs) do
  lane_batch_removed(job, now)  -- BATCH-9
end
for _, job in ipairs(doomed) do
  redis.call('ZREM', lane_key(job[1]), job[2])
  local found = lane_job(job[3])
  if found ~= nil then
    lane_delete(found)  -- where it is now (a parent here may have been released)
  end
end

for _, state in ipairs(LANE_STATES) do
  if redis.call('ZCARD', lane_key(state)) > 0 then
    return lane_result({'more', #doomed})
  end
end
for _, dedup_id in ipairs(redis.call('ZRANGE', lane_key('dedup-expiry'), 0, -1)) do
  redis.call('DEL', lane_owner_key(dedup_id))
end
for _, series_key in ipairs(redis.call('SMEMBERS', lane_key('repeats'))) do
  redis.call('DEL', lane_series_key(series_key))
end
local keys = {}
for i, name in ipairs(LANE_QUEUE_KEYS) do
  keys[i] = lane_key(name)
end
redis.call('DEL', unpack(keys))
return lane_result({'done', #doomed})
