-- lane.add_to_batch (sql/functions/19_batches.sql) on the batch's home queue (KEYS[1]):
-- more jobs for a batch that has not finished, its total grown in the same script. A
-- finished batch is refused, so a then callback adding to its own batch cannot start it
-- over. Returns ['not_found'], ['finished', finished_at] (nothing written) or ['ok', ids].
-- @include json
-- @include now
-- @include batches

local args = lane_args()
local now = lane_now(args.now)
local batch = lane_batch(args.id)
if batch == nil then
  return lane_result({'not_found'})
end
if batch.finished_at ~= nil then
  return lane_result({'finished', tonumber(batch.finished_at)})
end
redis.call('HINCRBY', lane_batch_key(args.id), 'total', args.total)
return lane_result({'ok', lane_batch_store(args.id, args.groups, now)})
