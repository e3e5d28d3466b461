-- lane.add_batch (BATCH-1, sql/functions/19_batches.sql) on the batch's home queue (its
-- callback queue, KEYS[1]): the record and every job in one script, so a batch is stored
-- whole or not at all. The client checked the batch, its options and every job's spec, and
-- sends `groups` (one per queue, includes/batches.lua), `callbacks` and the record's fields.
-- An empty batch finishes at once (its then and finally are enqueued). Returns ['exists']
-- (nothing written) or ['ok', ids by input position].
-- @include json
-- @include now
-- @include batches

local args = lane_args()
local now = lane_now(args.now)
local id = args.id
if redis.call('EXISTS', lane_batch_key(id)) == 1 then
  return lane_result({'exists'})
end
local fields = {'name', args.name, 'total', string.format('%d', args.total),
                'options', args.options, 'callbacks', args.callbacks,
                'created_at', string.format('%d', now)}
if args.allow_failures then
  fields[#fields + 1] = 'allow_failures'
  fields[#fields + 1] = '1'
end
redis.call('HSET', lane_batch_key(id), unpack(fields))
lane_ensure_queue(now)
local ids = lane_batch_store(id, args.groups, now)
if args.total == 0 then
  lane_batch_progress(id, lane_batch(id), 0, now)
end
return lane_result({'ok', ids})
