-- lane.release_deduplication_key (UNIQ-7, TX-10) and lane.remove_deduplication_key
-- (DEDUP-14), one script with a mode: with `args.any` the row of `args.id` goes whatever
-- holds it; else only while it carries `args.token` (and, with `reservation_only`, while
-- no job took it over). The owner job is not touched. True when a row went.
-- @include json
-- @include now
-- @include owners

local args = lane_args()
local owner = lane_owner(args.id)
if owner == nil then
  return lane_result(false)
end
if not args.any then
  if owner.token == nil or owner.token ~= args.token then
    return lane_result(false)
  end
  if args.reservation_only and owner.job_key ~= nil then
    return lane_result(false)  -- a job took it over: the write went through
  end
end
lane_owner_delete(args.id, lane_now(args.now))
return lane_result(true)
