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

-- This step's jobs: up to `chunk`, the indexes in turn, all checked before any goes.
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
lane_check_removable(ids)
for _, job in ipairs(doomed) do
  local f = redis.call('HMGET', lane_job_key(job[3]), 'key', 'dedup_id', 'repeat_key',
                       'batch_id', 'batch_tag', 'queue')
  lane_release_owners({key = f[1], dedup_id = f[2] or nil, repeat_key = f[3] or nil}, now)
  redis.call('ZREM', lane_key(job[1]), job[2])
  redis.call('DEL', lane_job_key(job[3]), lane_key('logs:' .. job[3]))
  lane_batch_removed({id = job[3], state = job[1], batch_id = f[4] or nil,
                      batch_tag = f[5] or nil, queue = f[6] or nil}, now)  -- BATCH-9
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
