-- lane.discard_job (MW-2): the job active under `token` is removed as remove_job removes
-- one (`removed {prev: active}`, its dedup owner and series released: lane_remove_standalone),
-- without a failed record; a queue under max_active wakes its claimers, a slot being free
-- (CLAIM-9, lane._wake_if_capped). A pending flow child is told to its parent (FLOW-26), a
-- batch's job settles as deleted (BATCH-9).
-- Returns [status]: 'ok', 'not_found' or 'lock_mismatch' (nothing written).
-- @include json
-- @include now
-- @include manage

local args = lane_args()
local now = lane_now(args.now)
local job, refused = lane_owned(args.id, args.token)
if job == nil then
  return lane_result({refused})
end
lane_remove_standalone(job, now)
lane_batch_removed(job, now)  -- BATCH-9
if redis.call('HEXISTS', KEYS[1], 'max_active') == 1 then
  lane_wake()
end
return lane_result({'ok'})
